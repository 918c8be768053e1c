//! # hcp-simulator: simulated Azure and HyperShift management cluster
//!
//! One HTTP router that speaks the real wire protocols of Microsoft Entra (token
//! endpoint), Azure Resource Manager, the Azure Blob data plane and a Kubernetes API
//! server with a simulated HyperShift operator, so the real clients — `azure_core` with
//! `azure_identity` credentials, and kube-rs — talk to it unchanged. Operators rehearse
//! rollouts and failures with it; every end-to-end test runs against it.
//!
//! **Architecture invariant:** the simulator shares no request/response types with the
//! client code (`activities`). Resources are JSON (`serde_json::Value`) with per-type logic
//! written from the real contract (DOMAIN.md and the reference examples), so a wire mismatch
//! between our client and Azure shows up as a failing test.
//!
//! ## Point the Azure SDKs, kubectl and your own scripts at it
//!
//! ```sh
//! hcp-workflow simulator serve --listen 127.0.0.1:8443 \
//!     --crds ../shared/reference/hypershift \
//!     --specs ../shared/spec-conformance/specs      # optional: validate request bodies
//! ```
//! `--crds` serves (and validates against) HyperShift's CRDs; `--specs` validates every
//! ARM PUT/PATCH body against Azure's OpenAPI specs, answering 400 `InvalidRequestContent`
//! naming the property as Azure does. The suite in `tests/official/` drives it with the
//! official clients (`tests/tests/e2e/official_clients.rs` runs it in CI); its `conftest.py` is
//! the worked example of everything below.
//!
//! **Azure SDK for Python** (azure-identity + azure-mgmt-*, azure-storage-blob). The SDKs
//! refuse bearer tokens over http, so keep their real `https://management.azure.com` /
//! `https://login.microsoftonline.com` / `https://{account}.blob.core.windows.net` URLs and
//! give every client (and the credential) a transport that sends each request to the
//! simulator with the host it meant in `x-ms-original-host`, restoring the URL afterwards
//! (the ARM pollers reuse it):
//! ```python
//! class SimTransport(RequestsTransport):            # azure.core.pipeline.transport
//!     def send(self, request, **kw):
//!         original = request.url; u = urlsplit(original)
//!         request.headers["x-ms-original-host"] = u.netloc
//!         request.url = urlunsplit(("http", "127.0.0.1:8443", u.path, u.query, u.fragment))
//!         try: return super().send(request, **kw)
//!         finally: request.url = original
//! t = SimTransport()
//! cred = ClientSecretCredential(TENANT, CLIENT_ID, "any-secret", transport=t)
//! rm = ResourceManagementClient(cred, SUBSCRIPTION, transport=t, polling_interval=0.05)
//! blob = BlobServiceClient(f"https://{acct}.blob.core.windows.net",
//!                          credential={"account_name": acct, "account_key": key}, transport=t)
//! ```
//! Any tenant, client id and secret work (the scenario `invalid_client_secret` refuses
//! them); any subscription id works. The SDKs' current default api-versions are accepted.
//! Blob requests are checked with the account key from `listKeys` (Shared Key).
//!
//! **kubectl** (1.31 and later) and the **`kubernetes` Python client**: a plain-http
//! server with a bearer token:
//! ```yaml
//! apiVersion: v1
//! kind: Config
//! clusters: [{name: sim, cluster: {server: "http://127.0.0.1:8443"}}]
//! users: [{name: admin, user: {token: any}}]
//! contexts: [{name: sim, context: {cluster: sim, user: admin}}]
//! current-context: sim
//! ```
//! `kubectl --kubeconfig that.yaml get hc -A`, `apply --server-side`, `wait`, `explain`
//! work; in Python `Configuration(host="http://127.0.0.1:8443", api_key={"authorization":
//! "Bearer any"})`.
//!
//! **Your own scripts** (curl): ARM at `http://127.0.0.1:8443/subscriptions/...?api-version=…`
//! with any `Authorization: Bearer …`; blobs at `/_blob/{account}/{container}/{blob}`;
//! the control surface under `/_sim/` (below).
//!
//! **hcp-workflow itself**: `hcp-workflow --simulator http://127.0.0.1:8443 start …`.
//!
//! ## Using it from Rust
//! - In process: [`Simulator::new`] + [`Simulator::router`] and `tower::ServiceExt::oneshot`
//!   (no socket), or [`Simulator::serve`] on a `TcpListener`.
//! - As a process: [`serve_cli`] (behind `hcp-workflow simulator serve --listen ADDR
//!   [--state FILE] [--time-scale F] [--seed N] [--crds DIR] [--specs DIR]`) prints the
//!   endpoints and the settings to use (`--simulator http://127.0.0.1:PORT`).
//!
//! ## URL shapes (one listener)
//! | Surface | How it is selected | Paths |
//! |---|---|---|
//! | Control | path | `GET /_sim/inventory`, `GET /_sim/machines` (CAPI Machines: pool, size, version, VM), `GET /_sim/requests[?since=SEQ]`, `DELETE /_sim/requests`, `GET/POST/DELETE /_sim/faults`, `DELETE /_sim/faults/{id}`, `GET/PUT /_sim/scenario`, `GET /_sim/info` |
//! | Entra | path | `POST /{tenant}/oauth2/v2.0/token` (client credentials: `client_secret` or `client_assertion`), `GET /{tenant}/v2.0/.well-known/openid-configuration` |
//! | ARM | path `/subscriptions/...` | resources, lists (`nextLink` with `$skipToken`), `POST …/storageAccounts/{a}/listKeys`, LRO URLs `/subscriptions/{s}/providers/{RP}/locations/{loc}/operations/{id}` (Azure-AsyncOperation) and `…/operationResults/{id}` (Location) |
//! | Blob | `Host: {account}.blob.core.windows.net`, or path | `/{container}/{blob…}`, or `/_blob/{account}/{container}/{blob…}` |
//! | Microsoft Graph | `Host: graph.microsoft.com` (`.us`, China), or path | `/v1.0/applications…`, `/v1.0/servicePrincipals…`, `/v1.0/directory/deletedItems/…` (see the `graph` module), or `/_graph/v1.0/…` |
//! | Key Vault | `Host: {vault}.vault.azure.net` (sovereign suffixes), or path | `/secrets/…`, `/certificates/…`, `/deleted…` (see the `keyvault` module), or `/_keyvault/{vault}/…` |
//! | Kubernetes | path | `/version`, `/api`, `/apis`, `/api/v1/...`, `/apis/{group}/{version}/...` |
//!
//! Azure SDK credentials refuse http, so a client keeps its real `https://…` URLs and its
//! transport sends them here; it should set [`ORIGINAL_HOST_HEADER`] (`x-ms-original-host`)
//! to the host it meant, which also makes the simulator hand out `https://{that host}/…`
//! in `nextLink`, `Azure-AsyncOperation` and `Location`. Plain-http callers get URLs on the
//! host they used. ARM requires an `Authorization: Bearer …` header (any token).
//!
//! ## ARM
//! Types and api-versions: DOMAIN.md §2 and the api-versions Azure serves today for each
//! modelled type (see the `arm` module; others answer 400 `NoRegisteredProviderFound` /
//! `InvalidApiVersionParameter`, a missing one 400 `MissingApiVersionParameter`). PATCH
//! updates tags; `If-Match` is honoured (412); bodies are validated with `--specs`. PUT is
//! create-or-replace (201 new, 200 replaced). Long-running operations follow each
//! provider: Microsoft.Network PUT → 201/200 with `provisioningState: Updating` +
//! `Azure-AsyncOperation`; network DELETE → 202 + `Azure-AsyncOperation` + `Location`;
//! resource-group DELETE → 202 + `Location` only; storage-account create → 202 + `Location`
//! only; Private DNS zone/link PUT and DELETE → 202 + both. All carry `Retry-After` (whole
//! seconds) and `retry-after-ms` (scaled). Status documents go `InProgress` →
//! `Succeeded`/`Failed`. Errors are `{"error":{"code","message","details"}}` +
//! `x-ms-error-code`. DELETE of a missing resource answers 204 (a missing group: 404).
//! Modelled Azure behaviours: resource groups own their contents (cascade delete, refused
//! while something outside depends on something inside); `InUseSubnetCannotBeDeleted`
//! (also for a VNet PUT that drops a used subnet); `PrincipalNotFound` for
//! [`SimConfig::principal_not_found_for`] after an identity's creation;
//! `RoleAssignmentExists`; 409 `ConcurrentFederatedIdentityCredentialsWritesForSingleManagedIdentity`
//! when federated-credential writes on one identity overlap; PE → PLS connections
//! (`Approved` when the PE's subscription is in `autoApproval`, else `Pending`; by id or
//! alias); rejection visible on the PE side; `PrivateLinkServiceWithPrivateEndpointConnectionsCannotBeDeleted`
//! ([`SimConfig::rejected_connection_blocks_pls_delete`]); `CannotDeleteLoadBalancerWithPrivateLinkService`;
//! per-subscription throttling with 429 `SubscriptionRequestsThrottled` + `Retry-After`.
//!
//! ## Kubernetes and the operator
//! See the `kube` module for verbs and caveats, and [`FINALIZER`]'s module for the
//! simulated HyperShift operator (private-router Service + internal LB, `Available`,
//! `Ready`, finalizer-guarded deletion). With [`SimConfig::crds_dir`] set, HostedCluster,
//! NodePool and AzurePrivateLinkService writes are validated against the CRD schemas (422);
//! the NodePool CEL rules on `replicas`/`autoScaling` and the HostedCluster's transition
//! rules (`private`, `topology`, `services`) are checked with or without them.
//!
//! **Day 2.** NodePools are reconciled on every tick: their machines are real ARM resources
//! in the cluster's managed resource group (per machine a VM `<pool>-<5>-<5>`, its NIC
//! `<vm>-nic` and OS disk `<vm>_OSDisk`, CAPZ-tagged), created, scaled, rolled to a new
//! machine template or release, and deleted with the NodePool or HostedCluster; the
//! scenario's `vm_core_quota` refuses VMs over the regional vCPU quota as Azure does. A
//! changed HostedCluster release upgrades the control plane (`status.version.history`),
//! refuses a y-stream downgrade, and stalls with the scenario's `stall_upgrade`. A changed
//! SSH key (synced into the control-plane namespace as `ssh-key`) rolls the machines to the
//! new config (`UpdatingConfig`); a topology switch between PublicAndPrivate and Private
//! removes or recreates the public `router` Service. See the `nodepool`, `machines` and
//! `operator` modules.
//!
//! **AKS and ARO HCP.** With `--management-platform aks` the management cluster
//! is an AKS `managedClusters` resource (`management`, in the management resource group;
//! read-only) with the Key Vault Secrets Provider add-on (its identity a real ARM identity),
//! an OIDC issuer and workload identity; the Secrets Store CSI driver's SecretProviderClass
//! API, the workload identity webhook's `MutatingWebhookConfiguration`, and the operator
//! installed for ARO HCP (`MANAGED_SERVICE=ARO-HCP`, `ARO_HCP_KEY_VAULT_USER_CLIENT_ID`); the
//! scenario's `aks` switches turn the add-ons off ([`AksScenario`]; the `aks` module). A
//! HostedCluster with `azureAuthenticationConfigType: ManagedIdentities` gets HyperShift's
//! eight SecretProviderClasses; each control-plane pod mounts its Key Vault secret as the
//! add-on identity, and what breaks (a refused mount, credentials Entra ID or ARM refuse, the
//! data-plane identities' federation) shows where it would on a real cluster: kubelet's
//! `FailedMount` events, NodePools not Ready, ClusterOperators not available, a control
//! plane never available (the `aro_hcp` module).
//!
//! ## Fault rules (`POST /_sim/faults`, answers `{"id": "fault-N"}`)
//! ```json
//! {"method": "PUT", "path": "*/privateLinkServices/*", "resource_type": "Microsoft.Network/privateLinkServices",
//!  "nth": 3, "probability": 0.2, "times": 1,
//!  "status": 429, "error_code": "TooManyRequests", "message": "...", "retry_after": 2,
//!  "latency_ms": 100, "drop_connection": false, "fail_async": false}
//! ```
//! All fields optional, but one of `status`, `latency_ms`, `drop_connection`, `fail_async`
//! is needed; see [`FaultRule`] for exact semantics. Rules are checked in insertion order;
//! the first firing rule wins. Requests answered by a fault or by throttling are logged.
//!
//! ## Name resolution (`GET /_sim/dns?vnet=VNET_ID&name=FQDN`)
//! What Azure DNS answers a machine in that VNet (linked private zones first, the most
//! specific one authoritative, no fall-through; then public zones), as the `dns` module
//! models it; without `vnet`, what public DNS answers.
//!
//! ## Preflight reads and failure scenarios
//! Resource providers, features, `Microsoft.Authorization/permissions`, usages, resource
//! SKUs, `checkNameAvailability`, `checkPrivateLinkServiceVisibility`, `SelfSubjectReview`,
//! `SelfSubjectAccessReview`, the HyperShift CRDs and the operator's `supported-versions`
//! ConfigMap; a [`Scenario`] (`SimConfig::scenario`, `simulator serve --scenario FILE.json`,
//! `GET`/`PUT /_sim/scenario`) makes them answer each failure. See the `preflight` module.
//!
//! ## Time, randomness, persistence
//! Every simulated delay is a model duration ([`LatencyModel`]) × [`SimConfig::time_scale`]
//! (default 0.01: a cluster lifecycle takes seconds; [`SimConfig::realistic`]: 1.0). The
//! clock is tokio's, so paused-time tests control it; throttling refills on unscaled time.
//! Generated ids derive from [`SimConfig::seed`]. With [`SimConfig::state_file`] the whole
//! state is written (temp file + rename) after every mutating request and every background
//! change, and loaded at start, so a separate simulator process outlives a killed worker.

mod aks;
mod arm;
mod aro_hcp;
mod blob;
mod conditions;
mod config;
mod control;
mod dns;
mod entra;
mod error;
mod faults;
mod graph;
mod guest;
mod guest_cloud;
mod http;
mod keyvault;
mod kube;
mod machines;
mod nodepool;
mod operator;
mod preflight;
mod privatelink_controllers;
mod release;
mod sim;
mod state;
mod throttle;
mod util;
mod workload_identity;

pub use aks::AksScenario;
pub use config::{
    DEFAULT_DNS_ZONE, DEFAULT_DNS_ZONE_RESOURCE_GROUP, DEFAULT_DNS_ZONE_SUBSCRIPTION,
    DEFAULT_HYPERSHIFT_VERSION, DnsZoneSeed, LatencyModel, ManagementPlatform, PrivatePlatform,
    SimConfig, ThrottleConfig, minor_version,
};
pub use error::Error;
pub use faults::FaultRule;
pub use http::ORIGINAL_HOST_HEADER;
pub use operator::FINALIZER;
pub use preflight::{DeniedAction, RestrictedSize, Scenario};
pub use sim::{InventoryItem, RequestRecord, ServeOptions, Simulator, banner, serve_cli};
