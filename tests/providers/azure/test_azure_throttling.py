"""A burst of ARM throttling (429 with Retry-After) while several NodeClaims launch at
once: azure-core's retry policy waits as long as ARM asks, every NodeClaim gets exactly
one VM and one NIC, and nothing is left behind without a NodeClaim."""

from __future__ import annotations

import asyncio
import time

from azurearm.server import ArmServer
from karpy_azure import AzureCloudProvider
from test_azure_launch import claim

LAUNCHES = 6
RETRY_AFTER = 2


async def test_a_burst_of_429s_with_retry_after_delays_launches_and_leaks_nothing(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    throttled = arm.fail("vm.create", "TooManyRequests", status=429, retry_after=RETRY_AFTER,
                         times=LAUNCHES)  # fmt: skip
    started = time.monotonic()
    launched = await asyncio.gather(*(azure.create(claim()) for _ in range(LAUNCHES)))
    elapsed = time.monotonic() - started
    assert throttled.times == 0, "the burst was not all served"
    # The retry policy's own backoff is 0.01 s here: only Retry-After explains the wait.
    assert elapsed >= RETRY_AFTER
    ids = [nc.status.provider_id for nc in launched]
    assert len(set(ids)) == LAUNCHES and all(ids)
    names = {"aks-" + (nc.metadata.name or "") for nc in launched}
    assert set(arm.state.vms) == names, "a VM without a NodeClaim, or a NodeClaim without one"
    assert len(arm.state.nics) == LAUNCHES
    for nc in launched:
        await azure.delete(nc)
    assert not arm.state.vms and not arm.state.nics
