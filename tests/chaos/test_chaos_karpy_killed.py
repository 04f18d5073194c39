"""Chaos scenario 1: karpy is SIGKILLed at random points while it scales a workload up,
and restarted each time.

The Deployment grows in steps, one per kill, so every kill lands while the leader has
work in hand: planning, creating NodeClaims, launching (nodes take 2 s to boot, so some
instances are always still booting — the kwok cloud keeps them across the restart),
registering. Each restart waits out the dead leader's Lease (15 s), as a real
replacement pod would. The audit then wants every pod Running on a NodeClaim-backed
node, one NodeClaim per instance and no spare nodes.

Short: 45 pods, 3 kills. KARPY_CHAOS=full: 300 pods, 20 kills. KARPY_CHAOS_SEED fixes
the kill points.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from typing import Any

import pytest
from audit import settled
from fleet import CREATED, Fleet
from kube import connect
from workload import Workload

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


async def test_karpy_killed_during_scale_up_leaks_and_doubles_nothing(
    cluster: Any, namespace: str, kwok_crd: None, scale: Any
) -> None:
    pods, kills = scale.pick(45, 300), scale.pick(3, 20)
    seed = int(os.environ.get("KARPY_CHAOS_SEED") or time.time())
    rng = random.Random(seed)
    started = time.monotonic()
    async with connect(cluster) as client, Fleet(cluster, lease_namespace=namespace) as fleet:
        async with Workload(client, namespace, "chaos-killed", registration_delay="2s") as work:
            await fleet.start()
            for step in range(kills):
                leader = await fleet.leader(timeout=60)
                await work.scale(pods * (step + 1) // kills)
                await asyncio.sleep(rng.uniform(0.2, 4.0))
                await fleet.kill(leader)
                await fleet.start()
            found = await settled(client, pools=[work.pool], namespace=namespace,
                                  app=work.name, pods=pods, timeout=240)
            created = len(fleet.messages(CREATED))
            claims = len(await work.nodeclaims())
            print(f"\nscenario 1 (seed {seed}): {found.line(kills, 'SIGKILLs')}; {created} "
                  f"NodeClaims created by {len(fleet.replicas)} processes, {claims} at the "
                  f"end; {time.monotonic() - started:.0f}s")
            assert found.pods == pods
            assert found.clean, found.details()
            # Every NodeClaim at the end is one karpy created and logged; none bought twice.
            assert claims <= created
        # Deleted while karpy still ran: termination must have emptied the cloud.
        assert work.forced == [], f"termination left these behind: {work.forced}"
        assert work.left_in_cloud == [], f"instances left in the cloud: {work.left_in_cloud}"
