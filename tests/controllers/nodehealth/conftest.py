"""Fixtures of the node repair tests: the in-memory API (karpy.runtime.testing.FakeClient
with the provider-ID index; its list honours label selectors as the cache does), a fake
clock, the fake provider with a Ready=False policy, Karpenter's metrics in memory and a
recorder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The NodeClaim tests' builders (nodeclaim_factories) live beside them.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "nodeclaim"))

from karpy.controllers.indexes import (
    INDEX_PROVIDER_ID,
    index_node_provider_id,
    index_nodeclaim_provider_id,
)
from karpy.runtime.kinds import NODE
from karpy.runtime.testing import FakeClient, FakeClock
from karpy.state.kinds import NODE_CLAIM


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def kube(clock: FakeClock) -> FakeClient:
    return FakeClient(clock=clock, indexers={
        (NODE_CLAIM, INDEX_PROVIDER_ID): index_nodeclaim_provider_id,
        (NODE, INDEX_PROVIDER_ID): index_node_provider_id,
    })
