"""The kwok provider counts a capacity reservation as a cloud does (issue 28): each
instance launched into it takes a slot, a full reservation's offerings are unavailable
and a NodeClaim pinned to it is refused with insufficient capacity, and deleting an
instance frees its slot. Runs on the in-memory FakeClient (no cluster)."""

from __future__ import annotations

import pytest

from karpy.apis.labels import LABEL_CAPACITY_TYPE
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider import InsufficientCapacityError, NodeClaimNotFoundError
from karpy.cloudprovider.kwok import KWOK_NODE_CLASS, KwokCloudProvider, to_instance_types
from karpy.cloudprovider.kwok._catalogue import InstanceTypeSpec
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool
from karpy.runtime import Kind
from karpy.runtime.testing import FakeClient

RESERVATION_ID = "karpenter.kwok.sh/reservation-id"
NODE_CLASS_KIND = Kind(group=KWOK_NODE_CLASS.group, version=KWOK_NODE_CLASS.version,
                       plural=KWOK_NODE_CLASS.plural, kind=KWOK_NODE_CLASS.kind,
                       namespaced=False)
PINNED = [
    {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["reserved"]},
    {"key": RESERVATION_ID, "operator": "In", "values": ["cr-1"]},
]


def _spec() -> InstanceTypeSpec:
    def offering(capacity_type: str, price: float, **extra: object) -> dict[str, object]:
        reqs = [{"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": [capacity_type]},
                {"key": "topology.kubernetes.io/zone", "operator": "In",
                 "values": ["test-zone-a"]}]
        if capacity_type == "reserved":
            reqs.append({"key": RESERVATION_ID, "operator": "In", "values": ["cr-1"]})
        return {"Price": price, "Requirements": reqs, **extra}

    return InstanceTypeSpec.model_validate({
        "name": "m-4x-amd64-linux", "architecture": "amd64", "operatingSystems": ["linux"],
        "resources": {"cpu": "4", "memory": "16Gi"},
        "offerings": [offering("on-demand", 0.2),
                      offering("reserved", 0.00002, ReservationCapacity=2)],
    })


def _reserved(types: object) -> tuple[int, bool]:
    (it,) = types  # type: ignore[misc]
    (offering,) = [o for o in it.offerings if o.reserved]
    return offering.reservation_capacity, offering.available


async def test_launches_take_slots_and_deleting_frees_one() -> None:
    client = FakeClient()
    await client.create(NODE_CLASS_KIND, {"metadata": {"name": "default"}, "spec": {},
                                          "status": {"conditions": [{
                                              "type": "Ready", "status": "True",
                                              "reason": "Ready", "message": "",
                                              "lastTransitionTime": "2026-11-23T20:00:00Z"}]}})
    provider = KwokCloudProvider(client, instance_types=to_instance_types([_spec()]))
    pool = make_nodepool(NodeClassReference(group=KWOK_NODE_CLASS.group,
                                            kind=KWOK_NODE_CLASS.kind, name="default"))
    assert _reserved(await provider.get_instance_types(pool)) == (2, True)

    launched = []
    for i in range(2):
        claim = make_nodeclaim(pool, requirements=PINNED, name=f"r-{i}",
                               requests={"cpu": "1"})
        done = await provider.create(claim)
        assert done.metadata.labels[LABEL_CAPACITY_TYPE] == "reserved"
        assert done.metadata.labels[RESERVATION_ID] == "cr-1"
        launched.append(done)
    assert _reserved(await provider.get_instance_types(pool)) == (0, False)

    # full: a NodeClaim pinned to the reservation is refused; an open one goes on-demand
    with pytest.raises(InsufficientCapacityError):
        await provider.create(make_nodeclaim(pool, requirements=PINNED, name="r-2"))
    open_claim = await provider.create(make_nodeclaim(pool, name="od-0"))
    assert open_claim.metadata.labels[LABEL_CAPACITY_TYPE] == "on-demand"

    # deleting one frees its slot for the next launch
    with pytest.raises(NodeClaimNotFoundError):  # kwok answers "gone" at once
        await provider.delete(launched[0])
    assert _reserved(await provider.get_instance_types(pool)) == (1, True)
    again = await provider.create(make_nodeclaim(pool, requirements=PINNED, name="r-3"))
    assert again.metadata.labels[RESERVATION_ID] == "cr-1"
