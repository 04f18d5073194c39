"""Fixtures for karpy-azure's tests: the ARM-shaped HTTPS test server (tests/azurearm)
and an AzureCloudProvider pointed at it with the real SDK clients, a static token and
polling interval 0.

The provider reads its AKSNodeClass from a StaticNodeClasses; the class's status is
resolved by the real status logic (image versions, subnet) against the test server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from azurearm.server import ArmServer
from karpy_azure import (
    ArmClients,
    AzureCloudProvider,
    AzureSettings,
    StaticNodeClasses,
    make_credential,
)
from karpy_azure._status import resolve_status
from karpy_azure.apis import AKSNodeClass

SUBSCRIPTION = "11111111-2222-3333-4444-555555555555"
NODE_RG = "MC_rg-demo_demo_southcentralus"
SUBNET = (
    f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-demo/providers/Microsoft.Network/"
    "virtualNetworks/aks-vnet/subnets/aks-subnet"
)
IMAGE_VERSION = "202411.12.0"
KUBERNETES_VERSION = "1.31.2"


async def kubernetes_version() -> str:
    return KUBERNETES_VERSION


@pytest_asyncio.fixture
async def arm(tmp_path: Path) -> AsyncIterator[ArmServer]:
    """A running test server with the cluster's subnet and node image versions."""
    server = ArmServer(tmp_path)
    await server.start()
    server.add_subnet(SUBNET)
    for image in ("2204gen2containerd", "2204containerd", "2204gen2arm64containerd",
                  "V3gen2", "V3", "V3gen2arm64"):
        server.state.image_versions[image] = ["202410.09.0", IMAGE_VERSION, "202409.30.1"]
    try:
        yield server
    finally:
        await server.stop()


def azure_settings(server: ArmServer, **extra: str) -> AzureSettings:
    return AzureSettings.from_settings(
        {
            "subscriptionID": SUBSCRIPTION,
            "nodeResourceGroup": NODE_RG,
            "location": "southcentralus",
            "vnetSubnetID": SUBNET,
            "armEndpoint": server.url,
            "pricingEndpoint": server.url,
            "caBundle": str(server.cert.cert_file),
            "credential": "static",
            "pollInterval": "0",
            **extra,
        },
        cluster_name="demo",
        environ={},
    )


async def ready_node_class(
    provider: AzureCloudProvider, name: str = "default", **spec: object
) -> AKSNodeClass:
    """An AKSNodeClass whose status the real status logic resolved against the server."""
    node_class = AKSNodeClass.model_validate({"metadata": {"name": name}, "spec": spec})
    await resolve_status(provider, node_class, kubernetes_version)
    return node_class


@pytest_asyncio.fixture
async def azure(arm: ArmServer) -> AsyncIterator[AzureCloudProvider]:
    """An AzureCloudProvider on the test server with a Ready AKSNodeClass ``default``."""
    settings = azure_settings(arm)
    provider = AzureCloudProvider(
        settings,
        arm=ArmClients.create(settings, make_credential(settings), retry_backoff_factor=0.01),
        node_classes=StaticNodeClasses({}),
    )
    node_classes = provider.node_classes
    assert isinstance(node_classes, StaticNodeClasses)
    node_classes.items["default"] = await ready_node_class(provider)
    try:
        yield provider
    finally:
        await provider.aclose()


@pytest.fixture
def node_classes(azure: AzureCloudProvider) -> StaticNodeClasses:
    found = azure.node_classes
    assert isinstance(found, StaticNodeClasses)
    return found
