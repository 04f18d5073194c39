"""Fixtures for karpy.runtime tests: a fake clock, and a runtime Client on the local cluster."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from karpy.runtime.testing import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    """A manually advanced clock (see karpy.runtime.testing.FakeClock)."""
    return FakeClock()


@pytest.fixture
async def rt_client(cluster: object) -> AsyncIterator[object]:
    """A karpy.runtime Client for the local control plane (closed after the test)."""
    from karpy.runtime import Client

    client = await Client.from_kubeconfig(cluster.kubeconfig)  # type: ignore[attr-defined]
    try:
        yield client
    finally:
        await client.close()
