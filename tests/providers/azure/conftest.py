"""Fixtures for karpy-azure's tests: the ARM-shaped HTTPS test server (``azurearm``,
beside them) and an AzureCloudProvider pointed at it with the real SDK clients, a static token and
polling interval 0.

The provider reads its AKSNodeClass from a StaticNodeClasses; the class's status is
resolved by the real status logic (image versions, subnet) against the test server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from azure_support import (
    IMAGE_VERSION,
    NODE_RG,
    NSG,
    SUBNET,
    SUBSCRIPTION,
    azure_settings,
    ready_node_class,
)
from azurearm.server import ArmServer
from karpy_azure import ArmClients, AzureCloudProvider, StaticNodeClasses, make_credential


@pytest_asyncio.fixture
async def arm(tmp_path: Path) -> AsyncIterator[ArmServer]:
    """A running test server with the cluster's subnet, AKS's managed NSG and load balancer
    and node image versions."""
    server = ArmServer(tmp_path)
    await server.start()
    server.add_subnet(SUBNET)
    server.add_nsg(NSG, subscription=SUBSCRIPTION, resource_group=NODE_RG)
    server.add_load_balancer("kubernetes", {"kubernetes": [], "aksOutboundBackendPool": []},
                             subscription=SUBSCRIPTION, resource_group=NODE_RG)
    for image in ("2204gen2containerd", "2204containerd", "2204gen2arm64containerd",
                  "2204gen2TLcontainerd", "2404gen2containerd", "2404containerd",
                  "2404gen2arm64containerd", "2404gen2TLcontainerd", "V2gen2", "V2",
                  "V2gen2arm64", "V2gen2TL", "V3gen2", "V3", "V3gen2arm64", "V3gen2TL"):
        server.state.image_versions[image] = ["202410.09.0", IMAGE_VERSION, "202409.30.1"]
    try:
        yield server
    finally:
        await server.stop()


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
