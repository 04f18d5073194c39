"""Chaos scenario: no runaway scale-up when the new nodes cannot take the pods.

The kwok "kubelet" registers every Node with a taint its NodeClaim does not declare
(the kwok provider's ``registrationTaints``, a kubelet's ``--register-with-taints``), and
the workload's pods do not tolerate it: they can never run on the nodes karpy buys for
them. Karpenter's documented failure here is to launch node after node (each new node
comes up tainted, the pods are still pending, so it plans another). karpy must buy what
the pods need once and then stop: the NodeClaims stay at the first round's count through
several pod re-trigger periods (10 s) after the nominations' TTL (20 s past
initialization) would have lapsed.

Short: 9 pods. KARPY_CHAOS=full: 60 pods.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from fleet import CREATED, Fleet
from kube import connect, eventually
from workload import Workload

from karpy.runtime import kinds

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SURPRISE = "example.com/surprise=x:NoSchedule"
# The nomination TTL (20 s after initialization) plus four of the provisioner's 10 s
# re-triggers of still-pending pods: a runaway shows within this window.
WATCH = 20.0 + 4 * 10.0


def initialized(claim: dict[str, Any]) -> bool:
    return any(c.get("type") == "Initialized" and c.get("status") == "True"
               for c in (claim.get("status") or {}).get("conditions") or ())


async def test_pods_no_new_node_can_take_do_not_buy_node_after_node(
    cluster: Any, namespace: str, kwok_crd: None, scale: Any
) -> None:
    pods = scale.pick(9, 60)
    started = time.monotonic()
    async with connect(cluster) as client, Fleet(
        cluster, lease_namespace=namespace,
        provider_settings={"registrationTaints": SURPRISE},
    ) as fleet:  # fmt: skip
        async with Workload(client, namespace, "chaos-runaway") as work:
            await fleet.start()
            await fleet.leader(timeout=60)
            await work.scale(pods)

            async def first_round() -> list[Any]:
                claims = await work.nodeclaims()
                pending = [p for p in await client.list(kinds.POD, namespace=namespace,
                                                         label_selector={"app": work.name})
                           if (p.get("status") or {}).get("phase") == "Pending"]
                return claims if (len(pending) == pods and claims
                                  and all(initialized(c) for c in claims)) else []

            claims = await eventually(first_round, timeout=120,
                                      what="the first NodeClaims initialized, pods pending")
            first = len(claims)
            for claim in claims:  # the fault is in place on every node bought
                node = await client.get(kinds.NODE, claim["status"]["nodeName"])
                assert "example.com/surprise" in {t["key"] for t in node["spec"]["taints"]}
            watch_from = time.monotonic()
            counts = []
            while time.monotonic() - watch_from < WATCH:
                counts.append(len(await work.nodeclaims()))
                await asyncio.sleep(5.0)
            final = len(await work.nodeclaims())
            running = await work.running()
            created = len(fleet.messages(CREATED))
            print(f"\nscenario runaway: {pods} pods that fit no node bought: {first} NodeClaims "
                  f"after the first round, {max([*counts, final])} at most and {final} after "
                  f"{WATCH:.0f}s more ({created} created in all, {running} pods running); "
                  f"{time.monotonic() - started:.0f}s")
            assert running == 0  # the fault works: no pod can run on the new nodes
            assert 1 <= first <= pods  # each NodeClaim was bought for at least one pod
            assert max([*counts, final]) == first, f"NodeClaims over time: {counts}"
            assert created == first
        assert work.forced == [], f"termination left these behind: {work.forced}"
        assert work.left_in_cloud == [], f"instances left in the cloud: {work.left_in_cloud}"
