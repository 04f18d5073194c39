"""Falling back to the next NodePool when the heaviest has no capacity at all (issue 41,
item 7; aws/karpenter-provider-aws#8885, kubernetes-sigs/karpenter#2275).

The heaviest NodePool offers only one zone and every offering there is out of capacity
(the kwok provider's ``insufficientCapacity`` fault, as a cloud's ICE). What Karpenter
users ask for is that the pods then land on the next NodePool at once, not after retries
of the first. karpy's launch tries every compatible offering of the NodeClaim, fails
naming them all, and marks them unavailable. A NodeClaim lists only the types its pods
fit, so the heavy pool may be tried again with the smaller types (a cloud may well have
those): each round asks only for offerings no failure named yet. Once all are marked, the
next batch plans the pods on the next NodePool. The test proves that — no offering tried
twice, no heavy NodeClaim after the last failure, every pod planned on the next pool in
the first batch after it — and prints how long it took.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import pytest
from harness import RunningKarpy, karpy_operator
from kube import clean_up, connect, deployment, eventually, nodepool, ready_node_class, running_pods

from karpy.controllers.settings import Settings
from karpy.runtime import kinds
from karpy.state.kinds import NODE_POOL

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NODE_CLASS = "fallback-e2e"
SELECT = "karpy-e2e"
ZONE_OUT, ZONE_OTHER = "test-zone-a", "test-zone-b"
PODS = 3


def when(record: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(record["time"]).replace("Z", "+00:00"))


def claim(record: dict[str, Any]) -> str:
    return str((record.get("NodeClaim") or {}).get("name", ""))


def offerings(record: dict[str, Any]) -> set[str]:
    """The offerings a failed launch names: ``... out of capacity (type/zone/ct, ...)``."""
    named = str(record.get("error", "")).rpartition("(")[2].rstrip(")")
    return {o.strip() for o in named.split(",") if o.count("/") == 2}


def created(op: RunningKarpy, pool: str) -> list[dict[str, Any]]:
    return [r for r in op.messages("created nodeclaim")
            if (r.get("NodePool") or {}).get("name") == pool]


async def test_pods_land_on_the_next_nodepool_in_the_batch_after_the_heaviest_fails(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    heavy, nxt, app = "fb-heavy", "fb-next", "fb"
    settings = Settings(batch_idle_duration=0.5, batch_max_duration=3.0)
    faults = {"insufficientCapacity": f"*/{ZONE_OUT}/*"}
    async with connect(cluster) as client, karpy_operator(
        cluster, settings=settings, provider_settings=faults
    ) as op:
        await ready_node_class(client, NODE_CLASS)
        for name, weight, zone in ((heavy, 100, ZONE_OUT), (nxt, 10, ZONE_OTHER)):
            await client.create(NODE_POOL, nodepool(
                name, node_class=NODE_CLASS, labels={SELECT: app}, weight=weight,
                requirements=[{"key": "topology.kubernetes.io/zone", "operator": "In",
                               "values": [zone]}]))
        try:
            began = time.monotonic()
            await client.create(kinds.DEPLOYMENT, deployment(
                app, node_selector={SELECT: app}, replicas=PODS, cpu="500m"),
                namespace=namespace)
            pods = await eventually(lambda: running_pods(client, namespace, app, PODS),
                                    timeout=120, what=f"{PODS} pods Running")
            running_after = time.monotonic() - began

            failed = [r for r in op.messages("failed launching nodeclaim")
                      if claim(r).startswith(heavy + "-")]
            heavy_claims = created(op, heavy)
            next_claims = created(op, nxt)
            assert heavy_claims, "the heavy NodePool was never tried"
            assert failed, "no launch on the heavy NodePool failed"
            assert all("insufficient capacity" in r["error"] for r in failed)
            # Every offering of the heavy pool refused once: no NodeClaim of it is made
            # again, and the pods went to the next pool.
            assert {claim(r) for r in heavy_claims} == {claim(r) for r in failed}
            last_failure = max(when(r) for r in failed)
            assert all(when(r) <= min(when(c) for c in next_claims) for r in heavy_claims)
            for pod in pods:
                node = await client.get(kinds.NODE, pod["spec"]["nodeName"])
                assert node["metadata"]["labels"]["karpenter.sh/nodepool"] == nxt
            # One batch after the last failure planned every pod on the next pool.
            batches = [r for r in op.messages("computed new nodeclaim(s) to fit pod(s)")
                       if when(r) >= last_failure]
            assert batches and batches[0]["pods"] == PODS, batches
            assert len(batches) == 1, f"the pods took {len(batches)} batches: {batches}"
            # No offering is tried again once it failed: each round of the heavy pool asks
            # only for offerings no earlier failure named (a first claim for all three
            # pods names the 2-vCPU-and-up types; the next round tries the 1-vCPU ones).
            created_at = {claim(r): when(r) for r in heavy_claims}
            plans = sorted(when(r) for r in op.messages("computed new nodeclaim(s) to fit pod(s)"))
            planned = {name: max(t for t in plans if t <= at) for name, at in created_at.items()}
            for r in failed:
                earlier = set().union(*(offerings(f) for f in failed
                                        if when(f) < planned[claim(r)]))
                assert not offerings(r) & earlier, f"{claim(r)} retried {offerings(r) & earlier}"
            rounds = len(set(planned.values()))
            to_next = (min(when(c) for c in next_claims) - last_failure).total_seconds()
            first = (min(when(c) for c in next_claims)
                     - min(when(c) for c in heavy_claims)).total_seconds()
            print(f"\nfallback: {len(created_at)} NodeClaim(s) of {heavy} failed in "
                  f"{rounds} batch(es) (insufficient capacity in every offering, none tried "
                  f"twice); the next pool's NodeClaim created {to_next:.2f} s after the last "
                  f"failure, {first:.2f} s after the first heavy NodeClaim; all {PODS} pods "
                  f"Running "
                  f"{running_after:.1f} s after the Deployment was created")
        finally:
            assert await clean_up(client, namespace, app, [heavy, nxt], timeout=90) == []
