"""Blob rows: azure-storage-blob against the simulated Blob service, authorized with the
account key from `listKeys` (Shared Key), as hcp-workflow publishes the OIDC documents.

What the real service does is documented in
https://learn.microsoft.com/rest/api/storageservices/authorize-with-shared-key (403
AuthenticationFailed for a signature made with another key),
https://learn.microsoft.com/rest/api/storageservices/specifying-the-range-header-for-blob-service-operations
(206 + Content-Range; 416 InvalidRange past the end) and
https://learn.microsoft.com/rest/api/storageservices/specifying-conditional-headers-for-blob-service-operations
(409 BlobAlreadyExists for `If-None-Match: *` on Put Blob; 412 ConditionNotMet for a stale
`If-Match`).
"""

import base64
import os

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
)
from azure.mgmt.resource.resources import ResourceManagementClient
from azure.mgmt.storage import StorageManagementClient
from azure.storage.blob import BlobServiceClient

from conftest import LOCATION


@pytest.fixture
def account(mgmt, unique):
    """A storage account with an `oidc` container (made through ARM, as the workflows do):
    (name, key1)."""
    rm = ResourceManagementClient(**mgmt)
    st = StorageManagementClient(**mgmt)
    group = f"conf-blob-{unique}"
    rm.resource_groups.create_or_update(group, {"location": LOCATION})
    name = f"blob{unique}"
    st.storage_accounts.begin_create(
        group, name, {"location": LOCATION, "sku": {"name": "Standard_LRS"}, "kind": "StorageV2"}
    ).result()
    st.blob_containers.create(group, name, "oidc", {})
    key = st.storage_accounts.list_keys(group, name)["keys"][0]["value"]
    yield name, key
    rm.resource_groups.begin_delete(group).result()


def _client(transport, name, key):
    return BlobServiceClient(
        account_url=f"https://{name}.blob.core.windows.net",
        credential={"account_name": name, "account_key": key},
        transport=transport,
    )


def test_shared_key_upload_and_download(transport, account):
    name, key = account
    blob = _client(transport, name, key).get_blob_client("oidc", ".well-known/openid-configuration")
    doc = b'{"issuer": "https://example"}'
    up = blob.upload_blob(doc, overwrite=True)
    assert up["etag"]
    # download_blob asks for a range (x-ms-range: bytes=0-…) and reads the size from the
    # 206's Content-Range.
    assert blob.download_blob().readall() == doc
    props = blob.get_blob_properties()
    assert props.size == len(doc) and props.etag == up["etag"]


def test_ranged_download_answers_206_with_content_range(transport, account):
    name, key = account
    blob = _client(transport, name, key).get_blob_client("oidc", "data.bin")
    data = os.urandom(4096)
    blob.upload_blob(data, overwrite=True)
    assert blob.download_blob(offset=100, length=50).readall() == data[100:150]
    assert blob.download_blob(offset=4000).readall() == data[4000:]
    raw = blob.download_blob(offset=10, length=5)
    assert raw.size == 5
    assert raw.properties.content_range == "bytes 10-14/4096"


def test_range_past_the_end_is_416(transport, account):
    name, key = account
    blob = _client(transport, name, key).get_blob_client("oidc", "small.bin")
    blob.upload_blob(b"0123456789", overwrite=True)
    with pytest.raises(HttpResponseError) as e:
        blob.download_blob(offset=100, length=10).readall()
    assert e.value.status_code == 416
    assert e.value.error_code == "InvalidRange"


def test_empty_blob_downloads(transport, account):
    # The SDK's first ranged GET of an empty blob gets 416 and falls back to a plain GET.
    name, key = account
    blob = _client(transport, name, key).get_blob_client("oidc", "empty")
    blob.upload_blob(b"", overwrite=True)
    assert blob.download_blob().readall() == b""


def test_wrong_account_key_is_403_authentication_failed(transport, account):
    name, _ = account
    wrong = base64.b64encode(os.urandom(64)).decode()
    blob = _client(transport, name, wrong).get_blob_client("oidc", "x.json")
    with pytest.raises(ClientAuthenticationError) as e:
        blob.upload_blob(b"{}", overwrite=True)
    assert e.value.status_code == 403
    assert e.value.error_code == "AuthenticationFailed"
    assert "AuthenticationErrorDetail" in e.value.response.text()


def test_second_account_key_also_signs(mgmt, transport, account):
    name, _ = account
    st = StorageManagementClient(**mgmt)
    group = f"conf-blob-{name[4:]}"
    key2 = st.storage_accounts.list_keys(group, name)["keys"][1]["value"]
    blob = _client(transport, name, key2).get_blob_client("oidc", "k2.json")
    blob.upload_blob(b"{}", overwrite=True)
    assert blob.download_blob().readall() == b"{}"


def test_upload_without_overwrite_on_existing_blob_is_409(transport, account):
    name, key = account
    blob = _client(transport, name, key).get_blob_client("oidc", "keys.json")
    blob.upload_blob(b"v1", overwrite=False)
    with pytest.raises(ResourceExistsError) as e:
        blob.upload_blob(b"v2", overwrite=False)
    assert e.value.status_code == 409
    assert e.value.error_code == "BlobAlreadyExists"
    assert blob.download_blob().readall() == b"v1"


def test_stale_if_match_is_412_condition_not_met(transport, account):
    name, key = account
    blob = _client(transport, name, key).get_blob_client("oidc", "doc.json")
    old = blob.upload_blob(b"v1", overwrite=True)["etag"]
    new = blob.upload_blob(b"v2", overwrite=True)["etag"]
    assert old != new
    with pytest.raises(ResourceModifiedError) as e:
        blob.upload_blob(b"v3", overwrite=True, etag=old, match_condition=MatchConditions.IfNotModified)
    assert e.value.status_code == 412
    assert e.value.error_code == "ConditionNotMet"
    blob.upload_blob(b"v3", overwrite=True, etag=new, match_condition=MatchConditions.IfNotModified)
    assert blob.download_blob().readall() == b"v3"
    with pytest.raises(ResourceModifiedError):
        blob.delete_blob(etag=new, match_condition=MatchConditions.IfNotModified)


def test_if_none_match_current_etag_on_read_is_304(transport, account):
    name, key = account
    blob = _client(transport, name, key).get_blob_client("oidc", "cached.json")
    etag = blob.upload_blob(b"{}", overwrite=True)["etag"]
    # Get Blob Properties (HEAD) and Get Blob answer 304 without a body; the SDK raises it
    # as an HttpResponseError.
    with pytest.raises(HttpResponseError) as e:
        blob.get_blob_properties(etag=etag, match_condition=MatchConditions.IfModified)
    assert e.value.status_code == 304
    with pytest.raises(HttpResponseError) as e:
        blob.download_blob(etag=etag, match_condition=MatchConditions.IfModified).readall()
    assert e.value.status_code == 304
