"""ARM rows: the Azure SDK for Python (its own pollers, pagers and api-version defaults)
against the simulated Resource Manager, for every resource type and operation the
workflows use, and each gap of issue 14 asserting what Azure does.

Every client runs with its package's *default* api-version (azure-mgmt-resource 26.0.0:
2025-04-01, azure-mgmt-network 33.1.0: 2026-03-01, azure-mgmt-storage 25.3.0: 2026-09-01,
azure-mgmt-msi 7.1.0: 2024-11-30, azure-mgmt-privatedns 2.0.0: 2024-06-01,
azure-mgmt-authorization 4.0.0: 2022-04-01, azure-mgmt-dns 9.0.0: 2018-05-01), which Azure
serves today; a simulator refusing them fails every row here.
"""

import uuid

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.mgmt.authorization import AuthorizationManagementClient
from azure.mgmt.dns import DnsManagementClient
from azure.mgmt.msi import ManagedServiceIdentityClient
from azure.mgmt.network import NetworkManagementClient
from azure.mgmt.privatedns import PrivateDnsManagementClient
from azure.mgmt.resource.resources import ResourceManagementClient
from azure.mgmt.storage import StorageManagementClient

from conftest import LOCATION, SUBSCRIPTION

# Built-in role "Storage Blob Data Contributor".
BLOB_CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"


def _rid(*parts):
    return "/".join(parts)


@pytest.fixture
def rm(mgmt):
    return ResourceManagementClient(**mgmt)


@pytest.fixture
def net(mgmt):
    return NetworkManagementClient(**mgmt)


@pytest.fixture
def group(rm, unique):
    """A resource group for one test, deleted (with everything in it) afterwards."""
    name = f"conf-{unique}"
    rm.resource_groups.create_or_update(name, {"location": LOCATION})
    yield name
    try:
        rm.resource_groups.begin_delete(name).result()
    except HttpResponseError:
        pass


def _vnet(net, group, name="vnet", subnets=None):
    subnets = subnets or [{"name": "default", "properties": {"addressPrefix": "10.0.0.0/24"}}]
    return net.virtual_networks.begin_create_or_update(
        group,
        name,
        {
            "location": LOCATION,
            "properties": {
                "addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
                "subnets": subnets,
            },
        },
    ).result()


def _error_code(e: HttpResponseError) -> str:
    return (e.error.code if e.error else None) or e.response.headers.get("x-ms-error-code")


# --- resource groups and the generic resource list -------------------------------------


def test_resource_group_lifecycle_with_patch_replacing_tags(rm, unique):
    name = f"conf-rg-{unique}"
    g = rm.resource_groups.create_or_update(name, {"location": LOCATION, "tags": {"a": "1"}})
    assert g.properties.provisioning_state == "Succeeded"
    assert rm.resource_groups.get(name).tags == {"a": "1"}
    # ResourceGroups_Update (PATCH, ResourceGroupPatchable): tags given replace the set.
    g = rm.resource_groups.update(name, {"tags": {"b": "2"}})
    assert g.tags == {"b": "2"}
    assert rm.resource_groups.get(name).tags == {"b": "2"}
    assert name in [x.name for x in rm.resource_groups.list()]
    rm.resource_groups.begin_delete(name).result()
    with pytest.raises(ResourceNotFoundError) as e:
        rm.resource_groups.get(name)
    assert _error_code(e.value) == "ResourceGroupNotFound"


def test_resource_group_list_follows_next_link(rm, sim, unique):
    # The simulator pages lists (list_page_size, 5 by default): more groups than one page
    # must all come back through the SDK pager's nextLink handling.
    page = sim.get("/_sim/info")["list_page_size"]
    names = [f"conf-page-{unique}-{i}" for i in range(page + 2)]
    for n in names:
        rm.resource_groups.create_or_update(n, {"location": LOCATION})
    try:
        listed = {g.name for g in rm.resource_groups.list()}
        assert set(names) <= listed
    finally:
        for n in names:
            rm.resource_groups.begin_delete(n)


def test_generic_resource_list_filters_by_tag_name_and_value(rm, net, group, unique):
    for name, tag in [("nsg-a", "x"), ("nsg-b", "y"), ("nsg-c", "x")]:
        net.network_security_groups.begin_create_or_update(
            group, name, {"location": LOCATION, "tags": {"conf": tag}}
        ).result()
    in_group = {r.name for r in rm.resources.list_by_resource_group(group)}
    assert {"nsg-a", "nsg-b", "nsg-c"} <= in_group
    hits = {
        r.id.rsplit("/", 1)[-1]
        for r in rm.resources.list(filter="tagName eq 'conf' and tagValue eq 'x'")
        if f"/resourceGroups/{group}/" in r.id
    }
    assert hits == {"nsg-a", "nsg-c"}
    by_group = {
        r.name for r in rm.resources.list_by_resource_group(group, filter="tagName eq 'conf' and tagValue eq 'y'")
    }
    assert by_group == {"nsg-b"}


def test_unknown_api_version_is_still_refused(mgmt):
    old = ResourceManagementClient(**mgmt, api_version="2001-01-01")
    with pytest.raises(HttpResponseError) as e:
        next(iter(old.resource_groups.list()))
    assert e.value.status_code == 400
    assert _error_code(e.value) == "InvalidApiVersionParameter"


# --- managed identities, federated credentials, role assignments -----------------------


def test_user_assigned_identity_and_federated_credentials(mgmt, group):
    msi = ManagedServiceIdentityClient(**mgmt)
    ident = msi.user_assigned_identities.create_or_update(group, "id1", {"location": LOCATION})
    assert ident.principal_id and ident.client_id
    assert msi.user_assigned_identities.get(group, "id1").client_id == ident.client_id
    assert [i.name for i in msi.user_assigned_identities.list_by_resource_group(group)] == ["id1"]
    # UserAssignedIdentities_Update (PATCH, IdentityUpdate): tags.
    upd = msi.user_assigned_identities.update(group, "id1", {"tags": {"k": "v"}})
    assert upd.tags == {"k": "v"} and upd.client_id == ident.client_id
    fic = msi.federated_identity_credentials.create_or_update(
        group,
        "id1",
        "fic1",
        {
            "properties": {
                "issuer": "https://issuer.example.com/cluster",
                "subject": "system:serviceaccount:ns:sa",
                "audiences": ["api://AzureADTokenExchange"],
            }
        },
    )
    assert fic.issuer == "https://issuer.example.com/cluster"
    assert [f.name for f in msi.federated_identity_credentials.list(group, "id1")] == ["fic1"]
    msi.federated_identity_credentials.delete(group, "id1", "fic1")
    assert list(msi.federated_identity_credentials.list(group, "id1")) == []
    msi.user_assigned_identities.delete(group, "id1")
    with pytest.raises(ResourceNotFoundError):
        msi.user_assigned_identities.get(group, "id1")


def test_federated_credential_without_audiences_is_400(mgmt, group):
    msi = ManagedServiceIdentityClient(**mgmt)
    msi.user_assigned_identities.create_or_update(group, "id1", {"location": LOCATION})
    with pytest.raises(HttpResponseError) as e:
        msi.federated_identity_credentials.create_or_update(
            group,
            "id1",
            "fic1",
            {"properties": {"issuer": "https://issuer.example.com", "subject": "s"}},
        )
    assert e.value.status_code == 400


def test_role_assignment_with_principal_type_avoids_principal_not_found(mgmt, sim, group):
    """A role assignment for a just-created identity: without `principalType` Azure answers
    400 PrincipalNotFound while Entra replicates; with `principalType: ServicePrincipal` it
    does not look the principal up and succeeds
    (https://learn.microsoft.com/azure/role-based-access-control/role-assignments-template#new-service-principal)."""
    msi = ManagedServiceIdentityClient(**mgmt)
    auth = AuthorizationManagementClient(**mgmt)
    scope = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{group}"
    role = f"/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Authorization/roleDefinitions/{BLOB_CONTRIBUTOR}"
    # The simulator's replication window is 30 s of model time (SimConfig default) times
    # its time scale; the untyped half is only observable when that window is long enough.
    window_ms = 30_000 * sim.get("/_sim/info")["time_scale"]
    a = msi.user_assigned_identities.create_or_update(group, "ida", {"location": LOCATION})
    if window_ms >= 1_000:
        with pytest.raises(HttpResponseError) as e:
            auth.role_assignments.create(
                scope,
                str(uuid.uuid4()),
                {"properties": {"roleDefinitionId": role, "principalId": a.principal_id}},
            )
        assert _error_code(e.value) == "PrincipalNotFound"
    b = msi.user_assigned_identities.create_or_update(group, "idb", {"location": LOCATION})
    name = str(uuid.uuid4())
    ra = auth.role_assignments.create(
        scope,
        name,
        {
            "properties": {
                "roleDefinitionId": role,
                "principalId": b.principal_id,
                "principalType": "ServicePrincipal",
            }
        },
    )
    assert ra.principal_type == "ServicePrincipal"
    assert auth.role_assignments.get(scope, name).principal_id == b.principal_id
    listed = [r.name for r in auth.role_assignments.list_for_scope(scope, filter=f"principalId eq '{b.principal_id}'")]
    assert listed == [name]
    auth.role_assignments.delete(scope, name)
    with pytest.raises(HttpResponseError) as e:
        auth.role_assignments.get(scope, name)
    assert e.value.status_code == 404


# --- storage ------------------------------------------------------------------------------


def test_storage_account_lifecycle_keys_container_and_patch(mgmt, group, unique):
    st = StorageManagementClient(**mgmt)
    name = f"conf{unique}"
    acct = st.storage_accounts.begin_create(
        group,
        name,
        {"location": LOCATION, "sku": {"name": "Standard_LRS"}, "kind": "StorageV2",
         "properties": {"allowBlobPublicAccess": True}},
    ).result()
    assert acct.provisioning_state == "Succeeded"
    assert acct.primary_endpoints.blob == f"https://{name}.blob.core.windows.net/"
    assert st.storage_accounts.get_properties(group, name).name == name
    assert [a.name for a in st.storage_accounts.list_by_resource_group(group)] == [name]
    keys = st.storage_accounts.list_keys(group, name)["keys"]
    assert [k.key_name for k in keys] == ["key1", "key2"] and all(k.value for k in keys)
    # StorageAccounts_Update (PATCH, StorageAccountUpdateParameters): tags.
    upd = st.storage_accounts.update(group, name, {"tags": {"t": "1"}})
    assert upd.tags == {"t": "1"}
    c = st.blob_containers.create(group, name, "oidc", {"properties": {"publicAccess": "Blob"}})
    assert c.public_access == "Blob"
    assert st.blob_containers.get(group, name, "oidc").name == "oidc"
    assert [x.name for x in st.blob_containers.list(group, name)] == ["oidc"]
    st.blob_containers.delete(group, name, "oidc")
    assert list(st.blob_containers.list(group, name)) == []
    st.storage_accounts.delete(group, name)
    with pytest.raises(ResourceNotFoundError):
        st.storage_accounts.get_properties(group, name)


def test_storage_check_name_availability(mgmt, group, unique):
    st = StorageManagementClient(**mgmt)
    name = f"conf{unique}"
    free = st.storage_accounts.check_name_availability(
        {"name": name, "type": "Microsoft.Storage/storageAccounts"}
    )
    assert free.name_available is True
    st.storage_accounts.begin_create(
        group, name, {"location": LOCATION, "sku": {"name": "Standard_LRS"}, "kind": "StorageV2"}
    ).result()
    taken = st.storage_accounts.check_name_availability(
        {"name": name, "type": "Microsoft.Storage/storageAccounts"}
    )
    assert taken.name_available is False and taken.reason == "AlreadyExists"
    bad = st.storage_accounts.check_name_availability(
        {"name": "Not-Valid", "type": "Microsoft.Storage/storageAccounts"}
    )
    assert bad.name_available is False and bad.reason == "AccountNameInvalid"


def test_storage_account_without_sku_is_400_naming_the_property(mgmt, group, unique):
    st = StorageManagementClient(**mgmt)
    with pytest.raises(HttpResponseError) as e:
        st.storage_accounts.begin_create(
            group, f"conf{unique}", {"location": LOCATION, "kind": "StorageV2"}
        ).result()
    assert e.value.status_code == 400
    assert "sku" in e.value.message


# --- virtual networks, subnets, NSGs --------------------------------------------------------


def test_vnet_subnet_nsg_lifecycle_with_update_tags(net, group):
    nsg = net.network_security_groups.begin_create_or_update(
        group,
        "nsg",
        {
            "location": LOCATION,
            "properties": {
                "securityRules": [
                    {
                        "name": "allow-https",
                        "properties": {
                            "protocol": "Tcp",
                            "access": "Allow",
                            "priority": 100,
                            "direction": "Inbound",
                            "sourceAddressPrefix": "*",
                            "sourcePortRange": "*",
                            "destinationAddressPrefix": "*",
                            "destinationPortRange": "443",
                        },
                    }
                ]
            },
        },
    ).result()
    assert nsg.properties.provisioning_state == "Succeeded"
    assert [r.name for r in nsg.properties.security_rules] == ["allow-https"]
    vnet = _vnet(net, group)
    assert [s.name for s in vnet.properties.subnets] == ["default"]
    sub = net.subnets.begin_create_or_update(
        group,
        "vnet",
        "workers",
        {"properties": {"addressPrefix": "10.0.1.0/24", "networkSecurityGroup": {"id": nsg.id}}},
    ).result()
    assert sub.properties.network_security_group.id.lower() == nsg.id.lower()
    assert {s.name for s in net.subnets.list(group, "vnet")} == {"default", "workers"}
    assert net.subnets.get(group, "vnet", "workers").properties.address_prefix == "10.0.1.0/24"
    # *_UpdateTags (PATCH, TagsObject): the tag set is replaced.
    tagged = net.virtual_networks.update_tags(group, "vnet", {"tags": {"env": "conf"}})
    assert tagged.tags == {"env": "conf"}
    assert net.network_security_groups.update_tags(group, "nsg", {"tags": {"a": "b"}}).tags == {"a": "b"}
    assert "vnet" in [v.name for v in net.virtual_networks.list(group)]
    net.subnets.begin_delete(group, "vnet", "workers").result()
    net.virtual_networks.begin_delete(group, "vnet").result()
    net.network_security_groups.begin_delete(group, "nsg").result()
    with pytest.raises(ResourceNotFoundError):
        net.virtual_networks.get(group, "vnet")


def test_nsg_rule_missing_access_priority_direction_is_400(net, group):
    # networkSecurityGroup.json: SecurityRulePropertiesFormat requires protocol, access,
    # priority and direction; ARM refuses the body before the resource provider sees it.
    with pytest.raises(HttpResponseError) as e:
        net.network_security_groups.begin_create_or_update(
            group,
            "nsg-bad",
            {
                "location": LOCATION,
                "properties": {"securityRules": [{"name": "r", "properties": {"protocol": "Tcp"}}]},
            },
        ).result()
    assert e.value.status_code == 400
    assert _error_code(e.value) == "InvalidRequestContent"
    assert "securityRules[0].properties" in e.value.message
    with pytest.raises(ResourceNotFoundError):
        net.network_security_groups.get(group, "nsg-bad")


def test_wrongly_typed_property_is_400(net, group):
    with pytest.raises(HttpResponseError) as e:
        net.virtual_networks.begin_create_or_update(
            group,
            "vnet-bad",
            {"location": LOCATION, "properties": {"addressSpace": {"addressPrefixes": "10.0.0.0/16"}}},
        ).result()
    assert e.value.status_code == 400
    assert "addressSpace.addressPrefixes" in e.value.message


def test_stale_if_match_on_network_put_and_delete_is_412(net, group):
    first = _vnet(net, group)
    second = net.virtual_networks.update_tags(group, "vnet", {"tags": {"v": "2"}})
    assert first.etag != second.etag
    body = {"location": LOCATION, "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}}}
    with pytest.raises(HttpResponseError) as e:
        net.virtual_networks.begin_create_or_update(
            group, "vnet", body, headers={"If-Match": first.etag}
        ).result()
    assert e.value.status_code == 412
    assert _error_code(e.value) == "PreconditionFailed"
    with pytest.raises(HttpResponseError) as e:
        net.virtual_networks.begin_delete(group, "vnet", headers={"If-Match": first.etag}).result()
    assert e.value.status_code == 412
    # The current etag passes.
    net.virtual_networks.begin_delete(group, "vnet", headers={"If-Match": second.etag}).result()


# --- load balancer, private link service, private endpoint -----------------------------------


def _private_link(net, group):
    _vnet(
        net,
        group,
        subnets=[
            {"name": "lb", "properties": {"addressPrefix": "10.0.0.0/24",
                                          "privateLinkServiceNetworkPolicies": "Disabled"}},
            {"name": "pe", "properties": {"addressPrefix": "10.0.1.0/24"}},
        ],
    )
    subnet = net.subnets.get(group, "vnet", "lb")
    lb = net.load_balancers.begin_create_or_update(
        group,
        "lb",
        {
            "location": LOCATION,
            "sku": {"name": "Standard"},
            "properties": {
                "frontendIPConfigurations": [
                    {"name": "fe", "properties": {"subnet": {"id": subnet.id},
                                                  "privateIPAllocationMethod": "Dynamic"}}
                ],
                "backendAddressPools": [{"name": "be"}],
            },
        },
    ).result()
    pls = net.private_link_services.begin_create_or_update(
        group,
        "pls",
        {
            "location": LOCATION,
            "properties": {
                "loadBalancerFrontendIpConfigurations": [
                    {"id": lb.properties.frontend_ip_configurations[0].id}
                ],
                "ipConfigurations": [
                    {"name": "nat", "properties": {"subnet": {"id": subnet.id}, "primary": True,
                                                   "privateIPAllocationMethod": "Dynamic"}}
                ],
            },
        },
    ).result()
    pe_subnet = net.subnets.get(group, "vnet", "pe")
    pe = net.private_endpoints.begin_create_or_update(
        group,
        "pe",
        {
            "location": LOCATION,
            "properties": {
                "subnet": {"id": pe_subnet.id},
                "manualPrivateLinkServiceConnections": [
                    {"name": "conn", "properties": {"privateLinkServiceId": pls.id}}
                ],
            },
        },
    ).result()
    return lb, pls, pe


def test_load_balancer_lifecycle_with_update_tags(net, group):
    lb, _, _ = _private_link(net, group)
    assert lb.properties.provisioning_state == "Succeeded"
    assert lb.properties.frontend_ip_configurations[0].properties.private_ip_address
    assert net.load_balancers.get(group, "lb").name == "lb"
    assert [x.name for x in net.load_balancers.list(group)] == ["lb"]
    assert net.load_balancers.update_tags(group, "lb", {"tags": {"x": "y"}}).tags == {"x": "y"}


def test_private_link_service_connection_reject_and_delete(net, group):
    _, pls, pe = _private_link(net, group)
    assert pls.properties.alias
    conns = list(net.private_link_services.list_private_endpoint_connections(group, "pls"))
    assert len(conns) == 1
    conn = conns[0]
    assert conn.properties.private_endpoint.id.lower() == pe.id.lower()
    body = conn.as_dict()
    body["properties"]["privateLinkServiceConnectionState"] = {
        "status": "Rejected",
        "description": "rejected by conformance test",
    }
    rejected = net.private_link_services.update_private_endpoint_connection(
        group, "pls", conn.name, body
    )
    assert rejected.properties.private_link_service_connection_state.status == "Rejected"
    got = net.private_link_services.get_private_endpoint_connection(group, "pls", conn.name)
    assert got.properties.private_link_service_connection_state.status == "Rejected"
    net.private_link_services.begin_delete_private_endpoint_connection(group, "pls", conn.name).result()
    assert list(net.private_link_services.list_private_endpoint_connections(group, "pls")) == []
    assert [p.name for p in net.private_endpoints.list(group)] == ["pe"]
    net.private_endpoints.begin_delete(group, "pe").result()
    net.private_link_services.begin_delete(group, "pls").result()
    net.load_balancers.begin_delete(group, "lb").result()


# --- private and public DNS ----------------------------------------------------------------------


def test_private_dns_zone_link_and_a_records(mgmt, net, group):
    dns = PrivateDnsManagementClient(**mgmt)
    vnet = _vnet(net, group)
    zone = dns.private_zones.begin_create_or_update(group, "conf.hypershift.local", {"location": "global"}).result()
    assert zone.properties.provisioning_state == "Succeeded" if hasattr(zone, "properties") else True
    link = dns.virtual_network_links.begin_create_or_update(
        group,
        "conf.hypershift.local",
        "link",
        {"location": "global", "properties": {"virtualNetwork": {"id": vnet.id}, "registrationEnabled": False}},
    ).result()
    assert link.properties.virtual_network_link_state == "Completed"
    rs = dns.record_sets.create_or_update(
        group, "conf.hypershift.local", "A", "api",
        {"properties": {"ttl": 300, "aRecords": [{"ipv4Address": "10.0.0.4"}]}},
    )
    assert rs.properties.fqdn == "api.conf.hypershift.local."
    got = dns.record_sets.get(group, "conf.hypershift.local", "A", "api")
    assert got.properties.a_records[0].ipv4_address == "10.0.0.4"
    assert [r.name for r in dns.record_sets.list_by_type(group, "conf.hypershift.local", "A")] == ["api"]
    assert [z.name for z in dns.private_zones.list_by_resource_group(group)] == ["conf.hypershift.local"]
    assert [l.name for l in dns.virtual_network_links.list(group, "conf.hypershift.local")] == ["link"]
    dns.record_sets.delete(group, "conf.hypershift.local", "A", "api")
    dns.virtual_network_links.begin_delete(group, "conf.hypershift.local", "link").result()
    dns.private_zones.begin_delete(group, "conf.hypershift.local").result()
    with pytest.raises(ResourceNotFoundError):
        dns.private_zones.get(group, "conf.hypershift.local")


def test_private_dns_zone_with_links_cannot_be_deleted(mgmt, net, group):
    # Azure refuses with 409 CannotDeleteResource ("Cannot delete resource while nested
    # resources exist. Some existing nested resource IDs include: '…virtualNetworkLinks/…'").
    dns = PrivateDnsManagementClient(**mgmt)
    vnet = _vnet(net, group)
    dns.private_zones.begin_create_or_update(group, "z.hypershift.local", {"location": "global"}).result()
    dns.virtual_network_links.begin_create_or_update(
        group, "z.hypershift.local", "link",
        {"location": "global", "properties": {"virtualNetwork": {"id": vnet.id}}},
    ).result()
    with pytest.raises(HttpResponseError) as e:
        dns.private_zones.begin_delete(group, "z.hypershift.local").result()
    assert e.value.status_code == 409
    assert _error_code(e.value) == "CannotDeleteResource"
    assert "virtualNetworkLinks/link" in e.value.message
    assert dns.private_zones.get(group, "z.hypershift.local").name == "z.hypershift.local"


def test_private_dns_zone_patch_and_stale_etag_delete(mgmt, group):
    dns = PrivateDnsManagementClient(**mgmt)
    old = dns.private_zones.begin_create_or_update(group, "e.hypershift.local", {"location": "global"}).result()
    new = dns.private_zones.begin_update(group, "e.hypershift.local", {"tags": {"k": "v"}}).result()
    assert new.tags == {"k": "v"} and new.etag != old.etag
    with pytest.raises(HttpResponseError) as e:
        dns.private_zones.begin_delete(
            group, "e.hypershift.local", etag=old.etag, match_condition=MatchConditions.IfNotModified
        ).result()
    assert e.value.status_code == 412
    dns.private_zones.begin_delete(
        group, "e.hypershift.local", etag=new.etag, match_condition=MatchConditions.IfNotModified
    ).result()


def test_private_dns_record_set_if_none_match_star_refuses_overwrite(mgmt, group):
    dns = PrivateDnsManagementClient(**mgmt)
    dns.private_zones.begin_create_or_update(group, "r.hypershift.local", {"location": "global"}).result()
    body = {"properties": {"ttl": 300, "aRecords": [{"ipv4Address": "10.0.0.5"}]}}
    dns.record_sets.create_or_update(group, "r.hypershift.local", "A", "api", body,
                                     match_condition=MatchConditions.IfMissing)
    with pytest.raises(HttpResponseError) as e:
        dns.record_sets.create_or_update(group, "r.hypershift.local", "A", "api", body,
                                         match_condition=MatchConditions.IfMissing)
    assert e.value.status_code == 412


def test_public_dns_zone_and_record_set(mgmt, group, unique):
    dns = DnsManagementClient(**mgmt)
    zone_name = f"conf-{unique}.example.com"
    zone = dns.zones.create_or_update(group, zone_name, {"location": "global"})
    assert zone.name == zone_name
    rs = dns.record_sets.create_or_update(
        group, zone_name, "api", "A", {"properties": {"TTL": 300, "ARecords": [{"ipv4Address": "1.2.3.4"}]}}
    )
    assert rs.name == "api"
    assert dns.record_sets.get(group, zone_name, "api", "A").name == "api"
    dns.record_sets.delete(group, zone_name, "api", "A")
    dns.zones.begin_delete(group, zone_name).result()
    with pytest.raises(ResourceNotFoundError):
        dns.zones.get(group, zone_name)
