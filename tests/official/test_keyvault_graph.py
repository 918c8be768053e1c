"""Key Vault and Microsoft Graph rows (issue 28 §4): the real Azure SDK for Python drives the
simulated Key Vault — azure-mgmt-keyvault for the `Microsoft.KeyVault/vaults` ARM type,
azure-keyvault-certificates and azure-keyvault-secrets (their challenge-based bearer policy
and their own certificate poller) for the data plane at `https://{vault}.vault.azure.net` —
and Microsoft Graph v1.0 as plain REST through azure-core's pipeline with an azure-identity
token (msgraph-sdk is too heavy for the handful of calls; see requirements.txt).

`tests/tests/official_clients.rs` runs this module on its own simulator
(`keyvault_and_graph_conform`); the rest of the suite runs in `official_clients_conform`.

What the real services do:
- Key Vault authentication ("Azure Key Vault authentication", learn.microsoft.com/azure/
  key-vault/general/authentication, and the SDK's own challenge_auth_policy.py): the first
  request goes without a token and without a body; the vault answers 401 with
  `WWW-Authenticate: Bearer authorization="https://login.microsoftonline.com/{tenant}",
  resource="https://vault.azure.net"`; the client asks Entra for `https://vault.azure.net/.default`
  and resends the request with the token and its body.
- Certificates (`certificates.json`, `CreateCertificate` 202 + `CertificateOperation`,
  `GetCertificateOperation`, `GetCertificate`): a self-signed PEM certificate's secret
  (`sid`) holds the PKCS#8 PRIVATE KEY and the CERTIFICATE; `x5t` is the base64url SHA-1
  of the DER (`cer`).
- Secrets (`secrets.json`): `SetSecret` 200, `DeleteSecret` 200 + `DeletedSecretBundle`,
  setting a deleted-but-recoverable name 409 `Conflict` / `ObjectIsDeletedButRecoverable`
  ("Azure Key Vault soft-delete overview"), `PurgeDeletedSecret` 204.
- RBAC (learn.microsoft.com/azure/key-vault/general/rbac-guide): on a vault with
  `enableRbacAuthorization` a principal without a data role gets 403 `Forbidden` with inner
  `ForbiddenByRbac`; "Key Vault Secrets User" at the vault lets it read secrets.
- Graph (learn.microsoft.com/graph/api/application-upsert, serviceprincipal-upsert,
  application-update, application-delete, directory-deleteditems-get/-delete,
  resources/keycredential): upsert by `uniqueName` with `Prefer: create-if-missing` is 201
  then 204; `keyCredentials` read back with `key: null`; deleting an application moves it
  to `directory/deletedItems`, deleting it there removes it for good.
"""

import base64
import json
import uuid

import pytest
from azure.core import PipelineClient
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.core.pipeline.policies import (
    BearerTokenCredentialPolicy,
    HeadersPolicy,
    RetryPolicy,
)
from azure.core.rest import HttpRequest
from azure.identity import ClientSecretCredential
from azure.keyvault.certificates import CertificateClient, CertificateContentType, CertificatePolicy
from azure.keyvault.secrets import SecretClient
from azure.mgmt.authorization import AuthorizationManagementClient
from azure.mgmt.keyvault import KeyVaultManagementClient
from azure.mgmt.keyvault import models as kvmodels
from azure.mgmt.resource.resources import ResourceManagementClient
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from conftest import LOCATION, SUBSCRIPTION, TENANT, SimTransport

GRAPH = "https://graph.microsoft.com/v1.0"
# Built-in role "Key Vault Secrets User" (learn.microsoft.com/azure/role-based-access-control/
# built-in-roles/security#key-vault-secrets-user).
SECRETS_USER = "4633458b-17de-408a-b874-0445c86b69e6"


class RecordingTransport(SimTransport):
    """SimTransport that remembers what went over the wire (to see the challenge flow)."""

    def __init__(self, base: str, **kwargs):
        super().__init__(base, **kwargs)
        self.sent = []

    def send(self, request, **kwargs):
        auth = request.headers.get("Authorization")
        body = request.data or request.content or b""
        response = super().send(request, **kwargs)
        self.sent.append(
            {
                "method": request.method,
                "url": request.url,
                "auth": auth,
                "body": len(body) if body else 0,
                "status": response.status_code,
                "challenge": response.headers.get("WWW-Authenticate"),
            }
        )
        return response


def _claims(auth_header: str) -> dict:
    token = auth_header.split(" ", 1)[1]
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


@pytest.fixture(scope="module")
def vault(arm):
    """A resource group and an RBAC key vault made with azure-mgmt-keyvault (its default
    api-version): (group, name, vaultUri). The vault is deleted and purged afterwards."""
    unique = uuid.uuid4().hex[:8]
    rm = ResourceManagementClient(**arm)
    kvm = KeyVaultManagementClient(**arm)
    group = f"conf-kv-{unique}"
    name = f"kv{unique}"
    rm.resource_groups.create_or_update(group, {"location": LOCATION})
    check = kvmodels.VaultCheckNameAvailabilityParameters(name=name)
    assert kvm.vaults.check_name_availability(check).name_available
    v = kvm.vaults.begin_create_or_update(
        group,
        name,
        kvmodels.VaultCreateOrUpdateParameters(
            location=LOCATION,
            properties=kvmodels.VaultProperties(
                tenant_id=TENANT,
                sku=kvmodels.Sku(family="A", name="standard"),
                enable_rbac_authorization=True,
            ),
        ),
    ).result()
    assert v.properties.enable_rbac_authorization is True
    assert v.properties.vault_uri == f"https://{name}.vault.azure.net/"
    got = kvm.vaults.get(group, name)
    assert got.id == v.id and got.properties.tenant_id == TENANT
    taken = kvm.vaults.check_name_availability(check)
    assert not taken.name_available and taken.reason == "AlreadyExists"
    yield group, name, v.properties.vault_uri
    kvm.vaults.delete(group, name)
    deleted = kvm.vaults.get_deleted(name, LOCATION)
    assert deleted.properties.vault_id == v.id
    kvm.vaults.begin_purge_deleted(name, LOCATION).result()
    rm.resource_groups.begin_delete(group).result()


@pytest.fixture(scope="module")
def recorder(sim):
    return RecordingTransport(sim.base)


@pytest.fixture(scope="module")
def certs(vault, credential, recorder):
    return CertificateClient(vault[2], credential, transport=recorder)


@pytest.fixture(scope="module")
def secrets(vault, credential, transport):
    return SecretClient(vault[2], credential, transport=transport)


@pytest.fixture(scope="module")
def certificate(certs):
    """A self-signed PEM certificate made in the vault and waited for with the SDK poller:
    (name, KeyVaultCertificate)."""
    name = "conf-cert"
    policy = CertificatePolicy(
        issuer_name="Self",
        subject="CN=conf.hcp.example.com",
        content_type=CertificateContentType.pem,
        key_type="RSA",
        key_size=2048,
        exportable=True,
        reuse_key=False,
        validity_in_months=12,
    )
    poller = certs.begin_create_certificate(name, policy, _polling_interval=0.05)
    created = poller.result()
    assert poller.done() and poller.status() == "completed"
    return name, created


@pytest.fixture(scope="module")
def graph(sim, credential):
    """An azure-core pipeline for Microsoft Graph: a bearer token for
    https://graph.microsoft.com/.default from the same azure-identity credential."""
    return PipelineClient(
        GRAPH,
        policies=[
            HeadersPolicy(),
            RetryPolicy(retry_total=0),
            BearerTokenCredentialPolicy(credential, "https://graph.microsoft.com/.default"),
        ],
        transport=SimTransport(sim.base),
    )


def _g(graph, method, path, body=None, headers=None):
    req = HttpRequest(method, GRAPH + path, json=body, headers=headers or {})
    return graph.send_request(req)


# --- Key Vault ---------------------------------------------------------------------------


def test_challenge_auth_first_request_is_401_then_retried_with_a_vault_token(
    certificate, recorder, vault
):
    # The very first data-plane request: the create, sent bare, challenged, then resent.
    first, second = recorder.sent[0], recorder.sent[1]
    assert first["method"] == "POST"
    assert first["url"].startswith(f"{vault[2]}certificates/conf-cert/create?api-version=")
    assert first["auth"] is None and first["body"] == 0
    assert first["status"] == 401
    assert first["challenge"].startswith("Bearer ")
    assert f'authorization="https://login.microsoftonline.com/{TENANT}"' in first["challenge"]
    assert 'resource="https://vault.azure.net"' in first["challenge"]
    assert second["url"] == first["url"] and second["status"] == 202
    assert second["body"] > 0
    claims = _claims(second["auth"])
    assert claims["aud"].rstrip("/") == "https://vault.azure.net"
    assert claims["tid"] == TENANT
    # Later requests reuse the cached challenge: no more 401s.
    assert all(r["status"] != 401 for r in recorder.sent[2:])
    assert all(r["auth"] for r in recorder.sent[1:])


def test_a_token_for_another_audience_is_challenged(sim, credential, certificate, vault):
    # A plain bearer policy with an ARM token: 401 AKV10022 and the challenge again.
    arm_token = PipelineClient(
        vault[2],
        policies=[
            RetryPolicy(retry_total=0),
            BearerTokenCredentialPolicy(credential, "https://management.azure.com/.default"),
        ],
        transport=SimTransport(sim.base),
    )
    url = f"{vault[2]}certificates/{certificate[0]}?api-version=7.5"
    r = arm_token.send_request(HttpRequest("GET", url))
    assert r.status_code == 401
    assert 'resource="https://vault.azure.net"' in r.headers["WWW-Authenticate"]
    err = r.json()["error"]
    assert err["code"] == "Unauthorized"
    assert err["message"].startswith("AKV10022: Invalid audience.")


def test_certificate_is_self_signed_pem_with_matching_key(certificate, certs, secrets, vault):
    name, created = certificate
    got = certs.get_certificate(name)
    assert got.id == created.id and got.properties.version == created.properties.version
    assert got.properties.enabled is True
    assert got.policy.issuer_name == "Self"
    assert got.policy.subject == "CN=conf.hcp.example.com"
    assert got.policy.content_type == CertificateContentType.pem
    assert got.policy.key_type == "RSA" and got.policy.key_size == 2048
    assert got.policy.exportable is True and got.policy.reuse_key is False
    assert got.policy.validity_in_months == 12
    der = bytes(got.cer)
    cert = x509.load_der_x509_certificate(der)
    assert cert.subject.rfc4514_string() == "CN=conf.hcp.example.com"
    assert cert.issuer == cert.subject
    assert cert.public_key().key_size == 2048
    sha1 = cert.fingerprint(hashes.SHA1())
    assert bytes(got.properties.x509_thumbprint) == sha1
    assert got.properties.not_before is not None
    assert got.properties.expires_on > got.properties.not_before
    assert got.secret_id == f"{vault[2]}secrets/{name}/{got.properties.version}"
    assert got.key_id == f"{vault[2]}keys/{name}/{got.properties.version}"

    # The certificate's secret: PKCS#8 PRIVATE KEY then CERTIFICATE, the same certificate.
    s = secrets.get_secret(name)
    assert s.properties.content_type == "application/x-pem-file"
    assert s.properties.managed is True
    assert s.properties.key_id == got.key_id
    assert s.properties.version == got.properties.version
    pem = s.value.encode()
    assert b"-----BEGIN PRIVATE KEY-----" in pem and b"-----BEGIN CERTIFICATE-----" in pem
    key = serialization.load_pem_private_key(pem, password=None)
    in_secret = x509.load_pem_x509_certificate(pem[pem.index(b"-----BEGIN CERTIFICATE-----") :])
    assert in_secret.public_bytes(serialization.Encoding.DER) == der
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    assert key.public_key().public_bytes(*spki) == cert.public_key().public_bytes(*spki)
    assert s.properties.not_before == got.properties.not_before
    assert s.properties.expires_on == got.properties.expires_on

    # The operation stays readable and says where the certificate is.
    op = certs.get_certificate_operation(name)
    assert op.status == "completed" and op.target.rstrip("/").endswith(f"/certificates/{name}")


def test_missing_certificate_is_404_certificate_not_found(certs):
    with pytest.raises(ResourceNotFoundError) as e:
        certs.get_certificate("no-such-cert")
    assert e.value.status_code == 404 and e.value.error.code == "CertificateNotFound"


def test_secret_set_get_delete_conflict_purge(secrets):
    name = "conf-plain"
    s1 = secrets.set_secret(name, "v1", content_type="text/plain", tags={"a": "b"})
    s2 = secrets.set_secret(name, "v2")
    assert s1.properties.version != s2.properties.version
    got = secrets.get_secret(name)
    assert got.value == "v2" and got.properties.version == s2.properties.version
    assert secrets.get_secret(name, s1.properties.version).value == "v1"
    old = secrets.get_secret(name, s1.properties.version)
    assert old.properties.content_type == "text/plain" and old.properties.tags == {"a": "b"}
    versions = {p.version for p in secrets.list_properties_of_secret_versions(name)}
    assert versions == {s1.properties.version, s2.properties.version}
    assert name in {p.name for p in secrets.list_properties_of_secrets()}

    # The SDK's delete poller: result() at once, wait() polls GET deletedsecrets/{name} until
    # the deletion is done (404 while it runs).
    poller = secrets.begin_delete_secret(name, _polling_interval=0.05)
    deleted = poller.result()
    poller.wait()
    assert poller.done()
    assert deleted.name == name and deleted.recovery_id.endswith(f"/deletedsecrets/{name}")
    assert deleted.deleted_date is not None and deleted.scheduled_purge_date is not None
    with pytest.raises(ResourceNotFoundError) as e:
        secrets.get_secret(name)
    assert e.value.error.code == "SecretNotFound"
    assert secrets.get_deleted_secret(name).name == name

    # The name is taken while the secret is recoverable.
    with pytest.raises(ResourceExistsError) as e:
        secrets.set_secret(name, "v3")
    assert e.value.status_code == 409
    assert e.value.error.code == "Conflict"
    assert e.value.error.innererror["code"] == "ObjectIsDeletedButRecoverable"
    assert "deleted but recoverable" in e.value.error.message

    secrets.purge_deleted_secret(name)
    with pytest.raises(ResourceNotFoundError):
        secrets.get_deleted_secret(name)
    again = secrets.set_secret(name, "v4")
    assert secrets.get_secret(name).value == "v4" and again.properties.version not in versions


def test_rbac_vault_denies_a_principal_without_a_data_role(arm, sim, vault, graph, secrets):
    # An application of the tenant (made through Graph, with its service principal) is not
    # the vault's creator: on an RBAC vault it needs a data role. (The simulated Entra takes
    # any client secret; the application has no password credential.)
    secrets.set_secret("conf-rbac", "for-the-app")
    uname = f"conf-rbac-{uuid.uuid4().hex[:8]}"
    upsert = {"Prefer": "create-if-missing"}
    r = _g(graph, "PATCH", f"/applications(uniqueName='{uname}')", {"displayName": uname}, upsert)
    assert r.status_code == 201, r.text()
    app = r.json()
    r = _g(graph, "PATCH", f"/servicePrincipals(appId='{app['appId']}')", {}, upsert)
    assert r.status_code == 201, r.text()
    sp = r.json()
    app_cred = ClientSecretCredential(
        TENANT, app["appId"], "not-a-real-secret", transport=SimTransport(sim.base)
    )
    as_app = SecretClient(vault[2], app_cred, transport=SimTransport(sim.base))
    with pytest.raises(HttpResponseError) as e:
        as_app.get_secret("conf-rbac")
    assert e.value.status_code == 403
    assert e.value.error.code == "Forbidden"
    assert e.value.error.innererror["code"] == "ForbiddenByRbac"
    assert "secrets/getSecret/action" in e.value.error.message

    auth = AuthorizationManagementClient(**arm)
    sub = f"/subscriptions/{SUBSCRIPTION}"
    scope = f"{sub}/resourceGroups/{vault[0]}/providers/Microsoft.KeyVault/vaults/{vault[1]}"
    auth.role_assignments.create(
        scope,
        str(uuid.uuid4()),
        {
            "role_definition_id": f"{sub}/providers/Microsoft.Authorization/roleDefinitions/{SECRETS_USER}",
            "principal_id": sp["id"],
            "principal_type": "ServicePrincipal",
        },
    )
    assert as_app.get_secret("conf-rbac").value == "for-the-app"
    # Secrets User reads; it does not write.
    with pytest.raises(HttpResponseError) as e:
        as_app.set_secret("conf-rbac", "x")
    assert e.value.status_code == 403 and e.value.error.innererror["code"] == "ForbiddenByRbac"

    assert _g(graph, "DELETE", f"/applications/{app['id']}").status_code == 204
    assert _g(graph, "DELETE", f"/directory/deletedItems/{app['id']}").status_code == 204


# --- Microsoft Graph ---------------------------------------------------------------------


def test_graph_application_upsert_key_credentials_service_principal_and_delete(
    graph, certificate, certs
):
    name, _ = certificate
    cert = certs.get_certificate(name)
    der = bytes(cert.cer)
    parsed = x509.load_der_x509_certificate(der)
    unique = uuid.uuid4().hex[:8]
    uname = f"conf-app-{unique}"
    body = {"displayName": uname, "tags": ["hcp-workflow"], "notes": "conformance"}
    upsert = {"Prefer": "create-if-missing"}

    # Missing, without the Prefer header: 404.
    r = _g(graph, "PATCH", f"/applications(uniqueName='{uname}')", body)
    assert r.status_code == 404 and r.json()["error"]["code"] == "Request_ResourceNotFound"
    assert "innerError" in r.json()["error"]

    r = _g(graph, "PATCH", f"/applications(uniqueName='{uname}')", body, upsert)
    assert r.status_code == 201, r.text()
    app = r.json()
    assert app["uniqueName"] == uname and app["displayName"] == uname
    assert uuid.UUID(app["id"]) and uuid.UUID(app["appId"])
    r = _g(graph, "PATCH", f"/applications(uniqueName='{uname}')", {**body, "notes": "again"}, upsert)
    assert r.status_code == 204 and not r.text()
    got = _g(graph, "GET", f"/applications(uniqueName='{uname}')").json()
    assert got["id"] == app["id"] and got["notes"] == "again"
    assert _g(graph, "GET", f"/applications(appId='{app['appId']}')").json()["id"] == app["id"]

    # keyCredentials: the certificate's public DER; read back with `key: null`.
    kc = {
        "type": "AsymmetricX509Cert",
        "usage": "Verify",
        "key": base64.b64encode(der).decode(),
        "displayName": "CN=conf.hcp.example.com",
    }
    r = _g(graph, "PATCH", f"/applications/{app['id']}", {"keyCredentials": [kc]})
    assert r.status_code == 204, r.text()
    creds = _g(graph, "GET", f"/applications/{app['id']}").json()["keyCredentials"]
    assert len(creds) == 1
    c = creds[0]
    assert c["type"] == "AsymmetricX509Cert" and c["usage"] == "Verify" and c["key"] is None
    assert c["displayName"] == "CN=conf.hcp.example.com"
    assert base64.b64decode(c["customKeyIdentifier"]) == parsed.fingerprint(hashes.SHA1())
    assert uuid.UUID(c["keyId"])
    assert c["startDateTime"][:19] == parsed.not_valid_before_utc.strftime("%Y-%m-%dT%H:%M:%S")
    assert c["endDateTime"][:19] == parsed.not_valid_after_utc.strftime("%Y-%m-%dT%H:%M:%S")

    # Its service principal, upserted by appId.
    sp_path = f"/servicePrincipals(appId='{app['appId']}')"
    r = _g(graph, "PATCH", sp_path, {}, upsert)
    assert r.status_code == 201, r.text()
    sp = r.json()
    assert sp["appId"] == app["appId"]
    assert _g(graph, "PATCH", sp_path, {}, upsert).status_code == 204
    listed = _g(graph, "GET", f"/servicePrincipals?$filter=appId eq '{app['appId']}'")
    listed = listed.json()["value"]
    assert [s["id"] for s in listed] == [sp["id"]]
    owners = _g(graph, "GET", f"/applications/{app['id']}/owners").json()["value"]
    assert owners and owners[0]["@odata.type"] == "#microsoft.graph.servicePrincipal"

    # Delete: to deleted items, then for good.
    assert _g(graph, "DELETE", f"/applications/{app['id']}").status_code == 204
    assert _g(graph, "GET", f"/applications/{app['id']}").status_code == 404
    item = _g(graph, "GET", f"/directory/deletedItems/{app['id']}")
    assert item.status_code == 200 and item.json()["id"] == app["id"]
    assert item.json()["@odata.type"] == "#microsoft.graph.application"
    assert _g(graph, "DELETE", f"/directory/deletedItems/{app['id']}").status_code == 204
    assert _g(graph, "GET", f"/directory/deletedItems/{app['id']}").status_code == 404


def test_graph_without_a_token_is_401(sim):
    plain = PipelineClient(
        GRAPH, policies=[RetryPolicy(retry_total=0)], transport=SimTransport(sim.base)
    )
    r = plain.send_request(HttpRequest("GET", GRAPH + "/applications"))
    assert r.status_code == 401 and r.json()["error"]["code"] == "InvalidAuthenticationToken"
