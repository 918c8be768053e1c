"""The `kubernetes` Python client against the simulated API server (issue 14).

Each row asserts what a real kube-apiserver answers; the source it follows is cited where
the behaviour is not obvious from the API reference
(https://kubernetes.io/docs/reference/using-api/api-concepts/).
"""

import json

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

GROUP = "hypershift.openshift.io"
VERSION = "v1beta1"
APPLY = "application/apply-patch+yaml"


def hosted_cluster(name: str, ns: str, image: str = "quay.io/openshift-release-dev/ocp-release:4.22.0-x86_64"):
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "HostedCluster",
        "metadata": {"name": name, "namespace": ns, "labels": {"team": "a"}},
        "spec": {
            "etcd": {
                "managementType": "Managed",
                "managed": {"storage": {"type": "PersistentVolume", "persistentVolume": {"size": "8Gi"}}},
            },
            "networking": {
                "networkType": "OVNKubernetes",
                "clusterNetwork": [{"cidr": "10.132.0.0/14"}],
                "serviceNetwork": [{"cidr": "172.31.0.0/16"}],
            },
            "platform": {
                "type": "Azure",
                "azure": {
                    "location": "eastus",
                    "resourceGroup": "rg",
                    "vnetID": "vnet",
                    "subnetID": "subnet",
                    "securityGroupID": "nsg",
                    "subscriptionID": "11111111-2222-3333-4444-555555555555",
                    "tenantID": "tenant",
                    "azureAuthenticationConfig": {"azureAuthenticationConfigType": "WorkloadIdentities"},
                },
            },
            "pullSecret": {"name": f"{name}-pull-secret"},
            "release": {"image": image},
            "services": [{"service": "APIServer", "servicePublishingStrategy": {"type": "LoadBalancer"}}],
            "dns": {"baseDomain": "example.com"},
        },
    }


@pytest.fixture
def core(kube):
    return client.CoreV1Api(kube)


@pytest.fixture
def custom(kube):
    return client.CustomObjectsApi(kube)


@pytest.fixture
def ns(core, unique):
    name = f"k-{unique}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


def cm(name, labels=None, data=None):
    return client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name, labels=labels), data=data or {"k": "v"}
    )


def status_of(e: ApiException) -> dict:
    return json.loads(e.body)


def apply_hc(custom, ns, body, manager, force=False, **kw):
    return custom.patch_namespaced_custom_object(
        GROUP, VERSION, ns, "hostedclusters", body["metadata"]["name"], body,
        field_manager=manager, force=force, _content_type=APPLY, **kw,
    )


# --- discovery ------------------------------------------------------------------------------


def test_discovery_lists_groups_short_names_and_status_subresources(kube, core):
    groups = {g.name for g in client.ApisApi(kube).get_api_versions().groups}
    assert {GROUP, "apps"} <= groups
    core_res = {r.name: r for r in core.get_api_resources().resources}
    assert core_res["namespaces"].short_names == ["ns"]
    assert core_res["configmaps"].short_names == ["cm"]
    assert "namespaces/status" in core_res
    hs = client.CustomObjectsApi(kube).get_api_resources(GROUP, VERSION)
    res = {r.name: r for r in hs.resources}
    # Short names as the HyperShift CRDs declare them (spec.names.shortNames).
    assert res["hostedclusters"].short_names == ["hc", "hcs"]
    assert res["nodepools"].short_names == ["np", "nps"]
    assert "hostedclusters/status" in res


# --- CRUD -----------------------------------------------------------------------------------


def test_core_crud_on_namespaces_secrets_and_configmaps(core, ns):
    s = core.create_namespaced_secret(
        ns, client.V1Secret(metadata=client.V1ObjectMeta(name="s1"), string_data={"a": "b"})
    )
    assert s.data == {"a": "Yg=="} and s.type == "Opaque"
    c = core.create_namespaced_config_map(ns, cm("c1"))
    assert c.metadata.uid and c.metadata.resource_version
    c.data = {"k": "v2"}
    c2 = core.replace_namespaced_config_map("c1", ns, c)
    assert c2.data == {"k": "v2"}
    assert int(c2.metadata.resource_version) > int(c.metadata.resource_version)
    # A replace with a stale resourceVersion is a 409 Conflict (optimistic concurrency).
    with pytest.raises(ApiException) as e:
        core.replace_namespaced_config_map("c1", ns, c)
    assert e.value.status == 409 and status_of(e.value)["reason"] == "Conflict"
    p = core.patch_namespaced_config_map("c1", ns, {"metadata": {"labels": {"x": "y"}}})
    assert p.metadata.labels == {"x": "y"} and p.data == {"k": "v2"}
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(ns, cm("c1"))
    assert e.value.status == 409 and status_of(e.value)["reason"] == "AlreadyExists"
    core.delete_namespaced_config_map("c1", ns)
    with pytest.raises(ApiException) as e:
        core.read_namespaced_config_map("c1", ns)
    assert e.value.status == 404
    assert status_of(e.value)["message"] == 'configmaps "c1" not found'


def test_custom_object_crud_for_hostedcluster_and_nodepool(custom, ns):
    hc = custom.create_namespaced_custom_object(GROUP, VERSION, ns, "hostedclusters", hosted_cluster("hc1", ns))
    assert hc["metadata"]["generation"] == 1
    got = custom.get_namespaced_custom_object(GROUP, VERSION, ns, "hostedclusters", "hc1")
    assert got["spec"]["dns"]["baseDomain"] == "example.com"
    patched = custom.patch_namespaced_custom_object(
        GROUP, VERSION, ns, "hostedclusters", "hc1", {"metadata": {"annotations": {"a": "b"}}}
    )
    assert patched["metadata"]["annotations"] == {"a": "b"}
    np = {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "NodePool",
        "metadata": {"name": "np1", "namespace": ns},
        "spec": {
            "clusterName": "hc1", "replicas": 2,
            "management": {"upgradeType": "Replace"},
            "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.22.0-x86_64"},
            "platform": {"type": "Azure"},
        },
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, ns, "nodepools", np)
    items = custom.list_namespaced_custom_object(GROUP, VERSION, ns, "nodepools")["items"]
    assert [i["metadata"]["name"] for i in items] == ["np1"]
    # An invalid object is refused with 422 Invalid by the CRD schema.
    bad = hosted_cluster("bad", ns)
    bad["spec"]["networking"]["networkType"] = "Nope"
    with pytest.raises(ApiException) as e:
        custom.create_namespaced_custom_object(GROUP, VERSION, ns, "hostedclusters", bad)
    assert e.value.status == 422 and status_of(e.value)["reason"] == "Invalid"


# --- server-side apply ------------------------------------------------------------------------


def test_apply_conflict_between_managers_then_force(custom, ns):
    body = hosted_cluster("hc1", ns)
    apply_hc(custom, ns, body, "A")
    other = hosted_cluster("hc1", ns, image="quay.io/openshift-release-dev/ocp-release:4.21.0-x86_64")
    with pytest.raises(ApiException) as e:
        apply_hc(custom, ns, other, "B")
    st = status_of(e.value)
    # k8s.io/apimachinery/pkg/util/managedfields/internal/conflict.go (getConflictMessage,
    # NewConflictError): one cause per conflicting field.
    assert e.value.status == 409 and st["reason"] == "Conflict"
    assert st["message"] == 'Apply failed with 1 conflict: conflict with "A": .spec.release.image'
    assert st["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "A"', "field": ".spec.release.image"}
    ]
    forced = apply_hc(custom, ns, other, "B", force=True)
    assert forced["spec"]["release"]["image"].endswith("4.21.0-x86_64")
    owners = {m["manager"]: m for m in forced["metadata"]["managedFields"]}
    assert "f:image" in owners["B"]["fieldsV1"]["f:spec"]["f:release"]
    assert "f:release" not in owners["A"]["fieldsV1"]["f:spec"]
    # Applying the same value as another manager is not a conflict: the field is shared.
    apply_hc(custom, ns, other, "C")


def test_apply_conflict_message_lists_several_fields(custom, ns):
    apply_hc(custom, ns, hosted_cluster("hc1", ns), "A")
    other = hosted_cluster("hc1", ns, image="x")
    other["spec"]["dns"]["baseDomain"] = "other.example.com"
    with pytest.raises(ApiException) as e:
        apply_hc(custom, ns, other, "B")
    assert status_of(e.value)["message"] == (
        'Apply failed with 2 conflicts: conflicts with "A":\n- .spec.dns.baseDomain\n- .spec.release.image'
    )
    assert len(status_of(e.value)["details"]["causes"]) == 2


def test_apply_records_managed_fields_and_removes_fields_no_longer_applied(core, ns):
    def apply(body, manager):
        return core.patch_namespaced_config_map(
            "c1", ns, body, field_manager=manager, _content_type=APPLY
        )

    base = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}}
    apply({**base, "data": {"a": "1", "b": "2"}}, "first")
    got = apply({**base, "data": {"a": "1"}}, "first")
    # The manager stopped applying b and nobody else owns it: removed.
    assert got.data == {"a": "1"}
    mf = got.metadata.managed_fields
    assert [(m.manager, m.operation, m.fields_type) for m in mf] == [("first", "Apply", "FieldsV1")]
    assert mf[0].fields_v1 == {"f:data": {"f:a": {}}}
    assert mf[0].time is not None
    # An Update (merge patch) records its own manager (fieldManager parameter).
    got = core.patch_namespaced_config_map("c1", ns, {"data": {"c": "3"}}, field_manager="editor")
    by = {(m.manager, m.operation): m.fields_v1 for m in got.metadata.managed_fields}
    assert by[("editor", "Update")] == {"f:data": {"f:c": {}}}
    # A field another manager also owns stays when one manager drops it.
    apply({**base, "data": {"a": "1", "c": "3"}}, "first")
    got = apply({**base, "data": {"a": "1"}}, "first")
    assert got.data == {"a": "1", "c": "3"}


def test_keyed_lists_merge_by_key_and_atomic_lists_conflict(custom, ns):
    """`spec.configuration.apiServer.audit.customRules` is `x-kubernetes-list-type: map`
    keyed by `group` in the CRD; `spec.services` has no list type, so it is atomic."""
    body = hosted_cluster("hc1", ns)
    body["spec"]["configuration"] = {"apiServer": {"audit": {"customRules": [
        {"group": "system:authenticated", "profile": "Default"}]}}}
    apply_hc(custom, ns, body, "A")
    head = {"apiVersion": body["apiVersion"], "kind": "HostedCluster", "metadata": {"name": "hc1"}}
    b = {**head, "spec": {"configuration": {"apiServer": {"audit": {"customRules": [
        {"group": "system:masters", "profile": "None"}]}}}}}
    got = apply_hc(custom, ns, b, "B")
    rules = got["spec"]["configuration"]["apiServer"]["audit"]["customRules"]
    assert [r["group"] for r in rules] == ["system:authenticated", "system:masters"]
    owned = {m["manager"]: m["fieldsV1"] for m in got["metadata"]["managedFields"]}
    assert 'k:{"group":"system:masters"}' in owned["B"]["f:spec"]["f:configuration"]["f:apiServer"]["f:audit"]["f:customRules"]
    atomic = {**head, "spec": {"services": [
        {"service": "OAuthServer", "servicePublishingStrategy": {"type": "Route"}}]}}
    with pytest.raises(ApiException) as e:
        apply_hc(custom, ns, atomic, "B")
    assert status_of(e.value)["message"] == 'Apply failed with 1 conflict: conflict with "A": .spec.services'


# --- delete ---------------------------------------------------------------------------------


def test_delete_with_a_wrong_uid_precondition_is_a_conflict(core, ns):
    c = core.create_namespaced_config_map(ns, cm("c1"))
    with pytest.raises(ApiException) as e:
        core.delete_namespaced_config_map(
            "c1", ns, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="wrong"))
        )
    st = status_of(e.value)
    # storage.Preconditions.Check wrapped by errors.NewConflict (apiserver generic registry).
    assert e.value.status == 409 and st["reason"] == "Conflict"
    assert st["message"] == (
        f'Operation cannot be fulfilled on configmaps "c1": Precondition failed: '
        f"UID in precondition: wrong, UID in object meta: {c.metadata.uid}"
    )
    with pytest.raises(ApiException) as e:
        core.delete_namespaced_config_map(
            "c1", ns, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(resource_version="1"))
        )
    assert e.value.status == 409
    core.read_namespaced_config_map("c1", ns)
    core.delete_namespaced_config_map(
        "c1", ns, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=c.metadata.uid))
    )


def test_immediate_delete_answers_status_or_object_per_registry(core, custom, ns):
    # genericregistry.Store.finalizeDelete: a Status Success unless the registry sets
    # ReturnDeletedObject (Services, Namespaces do; ConfigMaps and custom resources do not).
    core.create_namespaced_config_map(ns, cm("c1"))
    r = core.delete_namespaced_config_map("c1", ns, _preload_content=False)
    body = json.loads(r.data)
    assert r.status == 200 and body["kind"] == "Status" and body["status"] == "Success"
    assert body["details"]["name"] == "c1" and body["details"]["kind"] == "configmaps"
    core.create_namespaced_service(
        ns, client.V1Service(metadata=client.V1ObjectMeta(name="svc"),
                             spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=80)]))
    )
    r = core.delete_namespaced_service("svc", ns, _preload_content=False)
    assert json.loads(r.data)["kind"] == "Service"
    # An object held by finalizers is returned with its deletionTimestamp.
    custom.create_namespaced_custom_object(GROUP, VERSION, ns, "hostedclusters", hosted_cluster("hc1", ns))
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, ns, "hostedclusters", "hc1", {"metadata": {"finalizers": ["test/hold"]}}
    )
    got = custom.delete_namespaced_custom_object(GROUP, VERSION, ns, "hostedclusters", "hc1")
    assert got["kind"] == "HostedCluster" and got["metadata"]["deletionTimestamp"]


# --- dryRun ---------------------------------------------------------------------------------


def test_dry_run_does_not_persist(core, ns):
    made = core.create_namespaced_config_map(ns, cm("dry"), dry_run="All")
    assert made.metadata.name == "dry"
    with pytest.raises(ApiException) as e:
        core.read_namespaced_config_map("dry", ns)
    assert e.value.status == 404
    core.create_namespaced_config_map(ns, cm("c1"))
    p = core.patch_namespaced_config_map("c1", ns, {"data": {"k": "changed"}}, dry_run="All")
    assert p.data == {"k": "changed"}
    assert core.read_namespaced_config_map("c1", ns).data == {"k": "v"}
    core.delete_namespaced_config_map("c1", ns, dry_run="All")
    assert core.read_namespaced_config_map("c1", ns).data == {"k": "v"}
    r = core.patch_namespaced_config_map(
        "c2", ns, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c2"}},
        field_manager="m", _content_type=APPLY, dry_run="All",
    )
    assert r.metadata.name == "c2"
    with pytest.raises(ApiException):
        core.read_namespaced_config_map("c2", ns)


# --- lists ----------------------------------------------------------------------------------


def test_limit_and_continue_page_through_a_list(core, ns):
    for i in range(5):
        core.create_namespaced_config_map(ns, cm(f"p{i}", labels={"page": "yes"}))
    first = core.list_namespaced_config_map(ns, limit=2)
    assert [c.metadata.name for c in first.items] == ["p0", "p1"]
    assert first.metadata._continue and first.metadata.remaining_item_count == 3
    names = [c.metadata.name for c in first.items]
    token = first.metadata._continue
    while token:
        page = core.list_namespaced_config_map(ns, limit=2, _continue=token)
        names += [c.metadata.name for c in page.items]
        token = page.metadata._continue
    assert names == [f"p{i}" for i in range(5)]
    # remainingItemCount is not set when the list has a selector (ListMeta docs).
    sel = core.list_namespaced_config_map(ns, limit=2, label_selector="page=yes")
    assert sel.metadata._continue and sel.metadata.remaining_item_count is None


def test_set_based_label_selectors(core, ns):
    core.create_namespaced_config_map(ns, cm("a", labels={"env": "prod", "tier": "web"}))
    core.create_namespaced_config_map(ns, cm("b", labels={"env": "dev"}))
    core.create_namespaced_config_map(ns, cm("c"))

    def names(sel):
        return sorted(c.metadata.name for c in core.list_namespaced_config_map(ns, label_selector=sel).items)

    assert names("env in (prod, dev)") == ["a", "b"]
    assert names("env notin (prod)") == ["b", "c"]
    assert names("!env") == ["c"]
    assert names("env") == ["a", "b"]
    assert names("env in (prod),tier=web") == ["a"]
    assert names("env!=dev") == ["a", "c"]


def test_field_selectors_and_an_unsupported_one(core, custom, ns):
    core.create_namespaced_config_map(ns, cm("a"))
    core.create_namespaced_config_map(ns, cm("b"))
    got = core.list_namespaced_config_map(ns, field_selector="metadata.name=b")
    assert [c.metadata.name for c in got.items] == ["b"]
    got = core.list_config_map_for_all_namespaces(field_selector=f"metadata.namespace={ns},metadata.name!=b")
    assert [c.metadata.name for c in got.items] == ["a"]
    with pytest.raises(ApiException) as e:
        core.list_namespaced_config_map(ns, field_selector="data.k=v")
    assert e.value.status == 400 and status_of(e.value)["message"] == "field label not supported: data.k"
    with pytest.raises(ApiException) as e:
        custom.list_namespaced_custom_object(GROUP, VERSION, ns, "hostedclusters", field_selector="spec.foo=x")
    assert e.value.status == 400
    # Secrets support `type` (core/v1 conversion of field labels).
    core.create_namespaced_secret(ns, client.V1Secret(metadata=client.V1ObjectMeta(name="s"), type="x/y"))
    got = core.list_namespaced_secret(ns, field_selector="type=x/y")
    assert [s.metadata.name for s in got.items] == ["s"]


# --- watch ----------------------------------------------------------------------------------


def test_watch_from_a_resource_version_sees_only_later_events(core, ns):
    core.create_namespaced_config_map(ns, cm("before"))
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespaced_config_map(ns, cm("after"))
    core.delete_namespaced_config_map("after", ns)
    w = watch.Watch()
    seen = []
    for ev in w.stream(core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=1):
        seen.append((ev["type"], ev["object"].metadata.name))
        if len(seen) == 2:
            w.stop()
    assert seen == [("ADDED", "after"), ("DELETED", "after")]


# --- status subresource, pruning --------------------------------------------------------------


def test_status_subresource_separates_spec_and_status(custom, ns):
    custom.create_namespaced_custom_object(GROUP, VERSION, ns, "hostedclusters", hosted_cluster("hc1", ns))
    # Writes to the main resource ignore status (CRD subresources.status).
    p = custom.patch_namespaced_custom_object(
        GROUP, VERSION, ns, "hostedclusters", "hc1",
        {"status": {"kubeconfig": {"name": "forged"}}, "metadata": {"labels": {"l": "1"}}},
    )
    assert p.get("status", {}).get("kubeconfig") is None and p["metadata"]["labels"]["l"] == "1"
    # /status writes change only status.
    s = custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, ns, "hostedclusters", "hc1",
        {"status": {"kubeconfig": {"name": "kc"}}, "spec": {"dns": {"baseDomain": "changed.example.com"}}},
    )
    assert s["status"]["kubeconfig"] == {"name": "kc"}
    assert s["spec"]["dns"]["baseDomain"] == "example.com"


def test_unknown_fields_are_pruned_warned_or_refused(custom, ns, sim):
    body = hosted_cluster("hc1", ns)
    body["spec"]["dns"]["bogus"] = 1
    made = custom.create_namespaced_custom_object(GROUP, VERSION, ns, "hostedclusters", body)
    assert "bogus" not in made["spec"]["dns"]
    body["metadata"]["name"] = "hc2"
    with pytest.raises(ApiException) as e:
        custom.create_namespaced_custom_object(
            GROUP, VERSION, ns, "hostedclusters", body, field_validation="Strict"
        )
    assert e.value.status == 400 and 'unknown field "spec.dns.bogus"' in status_of(e.value)["message"]
    r = custom.create_namespaced_custom_object(
        GROUP, VERSION, ns, "hostedclusters", body, field_validation="Warn", _preload_content=False
    )
    assert 'unknown field \\"spec.dns.bogus\\"' in r.headers.get("Warning", "")
    # Built-in kinds are strictly decoded too (ConfigMap has no `dat` field). The Python
    # client's models refuse the unknown field before sending, so this row posts raw JSON.
    r = sim.http.post(
        f"{sim.base}/api/v1/namespaces/{ns}/configmaps?fieldValidation=Strict",
        json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "dat": {}},
        timeout=30,
    )
    assert r.status_code == 400
    assert r.json()["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "dat"'
    )


def test_operator_writes_are_recorded_as_its_field_manager(custom, ns):
    custom.create_namespaced_custom_object(GROUP, VERSION, ns, "hostedclusters", hosted_cluster("hc1", ns))
    import time

    for _ in range(50):
        hc = custom.get_namespaced_custom_object(GROUP, VERSION, ns, "hostedclusters", "hc1")
        if hc.get("status"):
            break
        time.sleep(0.1)
    managers = {(m["manager"], m.get("subresource")) for m in hc["metadata"]["managedFields"]}
    assert ("hypershift-operator", "status") in managers
