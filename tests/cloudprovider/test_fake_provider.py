"""The fake provider that controller unit tests use passes the conformance kit, records
what controllers asked of it, and fails on cue (one-shot errors, unavailable offerings)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from karpy.apis import NodeClaim
from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_ZONE
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider import (
    CreateError,
    DriftReason,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    OfferingKey,
)
from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.cloudprovider.testing import CloudProviderConformance, make_nodeclaim, make_nodepool


class TestFakeProviderConformance(CloudProviderConformance):
    timeout = 2.0

    @pytest.fixture
    def provider(self) -> FakeCloudProvider:
        return FakeCloudProvider()


@pytest.fixture
def fake() -> FakeCloudProvider:
    return FakeCloudProvider()


def nodeclaim(
    fake: FakeCloudProvider, requirements: Sequence[Mapping[str, Any]] = ()
) -> NodeClaim:
    kind = fake.supported_node_classes()[0]
    pool = make_nodepool(NodeClassReference(group=kind.group, kind=kind.kind, name="default"))
    return make_nodeclaim(pool, requests={"cpu": "1"}, requirements=requirements)


async def test_create_picks_the_cheapest_fitting_offering_and_records_the_call(
    fake: FakeCloudProvider,
) -> None:
    asked = nodeclaim(fake)
    launched = await fake.create(asked)
    # the smallest type that fits 1 CPU, on spot (cheaper), in the first zone by name
    assert launched.metadata.labels[LABEL_INSTANCE_TYPE] == "small-instance-type"
    assert launched.metadata.labels[LABEL_CAPACITY_TYPE] == "spot"
    assert launched.metadata.labels[LABEL_ZONE] == "test-zone-a"
    assert [c.metadata.name for c in fake.create_calls] == [asked.metadata.name]
    assert list(fake.instances) == [launched.status.provider_id]


async def test_a_next_error_fails_exactly_one_call(fake: FakeCloudProvider) -> None:
    fake.next_create_error = CreateError("quota exceeded", reason="QuotaExceeded")
    with pytest.raises(CreateError, match="quota exceeded"):
        await fake.create(nodeclaim(fake))
    launched = await fake.create(nodeclaim(fake))
    assert launched.status.provider_id in fake.instances
    assert len(fake.create_calls) == 2

    fake.next_delete_error = RuntimeError("api timeout")
    with pytest.raises(RuntimeError):
        await fake.delete(launched)
    await fake.delete(launched)
    with pytest.raises(NodeClaimNotFoundError):
        await fake.delete(launched)
    assert len(fake.delete_calls) == 3


async def test_unavailable_offerings_raise_insufficient_capacity_naming_them(
    fake: FakeCloudProvider,
) -> None:
    only = [
        {"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": ["small-instance-type"]},
        {"key": LABEL_ZONE, "operator": "In", "values": ["test-zone-b"]},
    ]
    fake.unavailable = {
        OfferingKey("small-instance-type", "test-zone-b", "spot"),
        OfferingKey("small-instance-type", "test-zone-b", "on-demand"),
    }
    with pytest.raises(InsufficientCapacityError) as raised:
        await fake.create(nodeclaim(fake, requirements=only))
    assert set(raised.value.offerings) == fake.unavailable
    # with spot gone only, it falls back to on-demand
    fake.unavailable = {OfferingKey("small-instance-type", "test-zone-b", "spot")}
    launched = await fake.create(nodeclaim(fake, requirements=only))
    assert launched.metadata.labels[LABEL_CAPACITY_TYPE] == "on-demand"


async def test_drift_and_reset(fake: FakeCloudProvider) -> None:
    launched = await fake.create(nodeclaim(fake))
    assert await fake.is_drifted(launched) is None
    fake.drifted = DriftReason("NodeClassDrift")
    assert await fake.is_drifted(launched) == "NodeClassDrift"
    fake.reset()
    assert fake.instances == {}
    assert fake.create_calls == []
    assert await fake.is_drifted(launched) is None
