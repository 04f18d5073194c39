"""Chaos scenario 2: the API server is restarted (SIGKILL; the control plane brings it
back on the same port) again and again while karpy, two replicas with leader election,
scales a workload up and then down.

Up: the Deployment grows in steps with a restart inside each. Down: it shrinks to a
third, and the NodeClaims of the nodes left empty are deleted, with restarts while
termination runs. Watches break, requests fail, the leader may lose its lease; the
audits after each half want the cloud and the cluster to agree and every pod Running.

Short: 45 pods, 4 restarts. KARPY_CHAOS=full: 300 pods, 10 restarts.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from typing import Any

import pytest
from audit import settled
from fleet import Fleet
from kube import connect, eventually
from workload import Workload

from karpy.runtime import kinds
from karpy.state.kinds import NODE_CLAIM

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


async def test_api_server_restarts_during_scale_up_and_down_break_nothing(
    cluster: Any, namespace: str, kwok_crd: None, scale: Any
) -> None:
    pods, restarts = scale.pick(45, 300), scale.pick(4, 10)
    up_restarts = restarts // 2
    seed = int(os.environ.get("KARPY_CHAOS_SEED") or time.time())
    rng = random.Random(seed)
    started = time.monotonic()

    async def restart() -> None:
        await asyncio.sleep(rng.uniform(0.5, 3.0))
        await asyncio.to_thread(cluster.restart_apiserver)

    async with connect(cluster) as client, Fleet(cluster, lease_namespace=namespace) as fleet:
        async with Workload(client, namespace, "chaos-apiserver",
                            registration_delay="2s") as work:
            await fleet.start()
            await fleet.start()
            for step in range(up_restarts):
                await fleet.leader(timeout=60)
                await work.scale(pods * (step + 1) // up_restarts)
                await restart()
            up = await settled(client, pools=[work.pool], namespace=namespace,
                               app=work.name, pods=pods, timeout=240)
            print(f"\nscenario 2 up (seed {seed}): {up.line(up_restarts, 'API server restarts')}")
            assert up.pods == pods
            assert up.clean, up.details()

            keep = pods // 3
            await work.scale(keep)
            down_restarts = restarts - up_restarts
            empty = await _empty_nodeclaims(client, work, keep)
            for i, name in enumerate(empty):
                await client.delete(NODE_CLAIM, name)
                if i * down_restarts // max(1, len(empty)) != \
                        (i + 1) * down_restarts // max(1, len(empty)):
                    await restart()
            down = await settled(client, pools=[work.pool], namespace=namespace,
                                 app=work.name, pods=keep, timeout=240, packed=False)
            print(f"scenario 2 down: {down.line(down_restarts, 'API server restarts')}; "
                  f"{len(empty)} empty NodeClaims deleted; "
                  f"{time.monotonic() - started:.0f}s")
            assert down.pods == keep
            assert down.clean, down.details()

            async def deleted() -> bool:  # termination may still be finishing: wait, bounded
                return not set(empty) & {c["metadata"]["name"] for c in await work.nodeclaims()}

            await eventually(deleted, timeout=120, what="the deleted NodeClaims to be gone")
        assert work.forced == [], f"termination left these behind: {work.forced}"
        assert work.left_in_cloud == [], f"instances left in the cloud: {work.left_in_cloud}"


async def _empty_nodeclaims(client: Any, work: Workload, keep: int) -> list[str]:
    """Once only ``keep`` pods are left, the NodeClaims whose nodes run none of them."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 120
    while True:
        pods = await client.list(kinds.POD, namespace=work.namespace,
                                 label_selector={"app": work.name})
        if len(pods) == keep or loop.time() > deadline:
            break
        await asyncio.sleep(1.0)
    used = {(p.get("spec") or {}).get("nodeName") for p in pods}
    return [c["metadata"]["name"] for c in await work.nodeclaims()
            if (c.get("status") or {}).get("nodeName") not in used]
