"""A NodeOverlay's capacity reaches karpy-azure's launch (as karpy-aws's): ``create``
applies the NodeOverlays in force to the VM sizes it chooses from, so a NodeClaim that
asks for an extended resource only an overlay adds launches on the size it was added to
and reports it, instead of fitting no size."""

from __future__ import annotations

import pytest
from karpy_azure import AzureCloudProvider

from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider import InsufficientCapacityError
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool
from karpy.scheduling import Requirement, Requirements
from karpy.scheduling.overlay import Overlay
from karpy.state import OverlayStore

DONGLE = "example.com/dongle"
SIZES = ["Standard_D2s_v3", "Standard_D4s_v3"]


def asking_for_a_dongle(pool_name: str) -> object:
    pool = make_nodepool(
        NodeClassReference(group="karpenter.azure.com", kind="AKSNodeClass", name="default"),
        name=pool_name,
    )
    return make_nodeclaim(pool, requests={"cpu": "100m", DONGLE: "1"}, requirements=[
        {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        {"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": SIZES},
    ])  # fmt: skip


async def test_an_overlays_extended_resource_launches_on_the_size_it_was_added_to(
    azure: AzureCloudProvider,
) -> None:
    store = OverlayStore()
    store.update([Overlay(
        name="dongles", capacity={DONGLE: 1},
        requirements=Requirements([Requirement.new(LABEL_INSTANCE_TYPE, "In", [SIZES[1]])]),
    )], ["with-dongles"])  # fmt: skip
    azure.overlays = store
    launched = await azure.create(asking_for_a_dongle("with-dongles"))  # type: ignore[arg-type]
    assert launched.metadata.labels[LABEL_INSTANCE_TYPE] == SIZES[1]
    assert launched.status.capacity[DONGLE] == "1"


async def test_without_the_overlay_no_size_fits_the_extended_resource(
    azure: AzureCloudProvider,
) -> None:
    with pytest.raises(InsufficientCapacityError):
        await azure.create(asking_for_a_dongle("no-dongles"))  # type: ignore[arg-type]
