"""``karpy top`` prices nodes at the NodeOverlays the running karpy put in force
(``ValidationSucceeded=True``), not those it did not (gate off: no condition; or a
conflict), and keeps the last ones when listing them fails."""

from __future__ import annotations

from typing import Any

from karpy.cloudprovider import UnavailableOfferings
from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.controllers.inputs.instancetypes import InstanceTypeCache
from karpy.runtime import errors
from karpy.runtime.testing import FakeClient, FakeClock
from karpy.state import Cluster, OverlayStore
from karpy.state import testing as t
from karpy.state.cost import MachineOffering, load_price_book
from karpy.state.kinds import NODE_OVERLAY
from karpy.tools.overlays_in_force import InForceOverlays

LARGE = MachineOffering("default", "large-instance-type", "test-zone-a", "on-demand")


def overlay(name: str, status: str | None, price: str) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
        "metadata": {"name": name},
        "spec": {"requirements": [{"key": "node.kubernetes.io/instance-type",
                                   "operator": "In", "values": ["large-instance-type"]}],
                 "price": price},
    }
    if status is not None:
        obj["status"] = {"conditions": [{"type": "ValidationSucceeded", "status": status,
                                         "reason": "x", "message": "",
                                         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    return obj


class Top:
    """What karpy top wires: a catalogue applying a store the overlays keep."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.client = FakeClient(clock=self.clock)
        self.cluster = Cluster(clock=self.clock)
        self.cluster.update_nodepool(t.nodepool("default"))
        store = OverlayStore()
        self.catalogue = InstanceTypeCache(
            FakeCloudProvider(), UnavailableOfferings(clock=self.clock), self.clock,
            overlays=store,
        )
        self.overlays = InForceOverlays(self.client, store, self.clock)

    async def price(self) -> float | None:
        await self.overlays.refresh(self.cluster, self.catalogue)
        book = await load_price_book(self.cluster.nodepools(), self.catalogue.get)
        return book.price(LARGE)


async def test_top_prices_at_the_overlays_in_force_only() -> None:
    top = Top()
    cloud = await top.price()
    assert cloud is not None and cloud > 0.4
    # the gate is off in the running karpy: nobody judged it, top does not apply it
    top.client.add(NODE_OVERLAY, overlay("unjudged", None, "0.001"))
    top.client.add(NODE_OVERLAY, overlay("refused", "False", "0.002"))
    assert await top.price() == cloud
    top.client.add(NODE_OVERLAY, overlay("cheap", "True", "0.003"))
    assert await top.price() == cloud  # listed again only once a minute
    top.clock.advance(61)
    assert await top.price() == 0.003


async def test_a_failed_list_keeps_the_last_overlays() -> None:
    top = Top()
    top.client.add(NODE_OVERLAY, overlay("cheap", "True", "0.003"))
    assert await top.price() == 0.003

    async def broken(*_: Any, **__: Any) -> Any:
        raise errors.ServerError("etcd is down")

    top.client.list = broken  # type: ignore[method-assign]
    top.clock.advance(61)
    assert await top.price() == 0.003
