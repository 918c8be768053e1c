"""Smoke rows: each client family reaches the simulator at all."""

from azure.mgmt.resource.resources import ResourceManagementClient

from conftest import LOCATION


def test_resource_group_roundtrip_with_the_sdk_poller(arm, unique):
    rm = ResourceManagementClient(**arm)
    name = f"smoke-{unique}"
    g = rm.resource_groups.create_or_update(name, {"location": LOCATION})
    assert g.name == name and g.location == LOCATION
    assert rm.resource_groups.check_existence(name)
    rm.resource_groups.begin_delete(name).result()
    assert not rm.resource_groups.check_existence(name)


def test_kubectl_reaches_the_api_server(kubectl):
    out = kubectl("version", "-o", "json").stdout
    assert '"serverVersion"' in out


def test_kubernetes_client_lists_namespaces(kube, unique):
    from kubernetes import client

    core = client.CoreV1Api(kube)
    name = f"smoke-{unique}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    names = [n.metadata.name for n in core.list_namespace().items]
    assert name in names
