"""A NodeOverlay's capacity reaches karpy-aws's launch: the core plans a NodeClaim that
asks for an extended resource EC2 does not report (an overlay adds it to m5.large), and
``create`` applies the same overlays to its catalogue (Karpenter AWS's Create applies
the NodeOverlay store by the NodeClaim's NodePool), so the NodeClaim launches there and
reports the overlaid capacity, instead of fitting no instance type at all."""

from __future__ import annotations

import pytest
from karpy_aws import AWSCloudProvider
from test_launch import ON_DEMAND, REF

from karpy.apis import labels as wk
from karpy.cloudprovider import InsufficientCapacityError, NoOverlays
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool
from karpy.scheduling import Requirement, Requirements
from karpy.scheduling.overlay import Overlay
from karpy.state import OverlayStore

DONGLE = "example.com/dongle"


def dongle_overlay() -> Overlay:
    return Overlay(
        name="dongles-on-m5-large",
        requirements=Requirements([Requirement.new(wk.LABEL_INSTANCE_TYPE, "In", ["m5.large"])]),
        capacity={DONGLE: 2},
    )


def asking_for_a_dongle(pool_name: str) -> object:
    pool = make_nodepool(REF, name=pool_name)
    return make_nodeclaim(pool, requests={"cpu": "1", DONGLE: "1"}, requirements=[
        ON_DEMAND,
        {"key": wk.LABEL_INSTANCE_TYPE, "operator": "In", "values": ["m5.large", "c5.large"]},
    ])  # fmt: skip


async def test_an_overlays_extended_resource_launches_on_the_type_it_was_added_to(
    aws_provider: AWSCloudProvider,
) -> None:
    store = OverlayStore()
    store.update([dongle_overlay()], ["team-dongle"])
    aws_provider.overlays = store  # the provider is shared by the module's tests
    try:
        launched = await aws_provider.create(asking_for_a_dongle("team-dongle"))  # type: ignore[arg-type]
    finally:
        aws_provider.overlays = NoOverlays()
    try:
        assert launched.metadata.labels[wk.LABEL_INSTANCE_TYPE] == "m5.large"
        assert launched.status.capacity[DONGLE] == "2"
        assert launched.status.allocatable[DONGLE] == "2"
    finally:
        await aws_provider.delete(launched)


async def test_without_the_overlay_nothing_fits_the_extended_resource(
    aws_provider: AWSCloudProvider,
) -> None:
    with pytest.raises(InsufficientCapacityError):
        await aws_provider.create(asking_for_a_dongle("team-no-overlay"))  # type: ignore[arg-type]
