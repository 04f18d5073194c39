"""Surge before evict on the local cluster (issue 41, item 1): the only replica of a
Deployment, held by a PodDisruptionBudget of ``maxUnavailable: 0``, on a node
consolidation replaces. Karpenter (and karpy without the opt-in) leaves that node for
ever (tests/e2e/test_disruption.py::test_a_zero_pdb_blocks_consolidation); with
``karpy.dev/surge-before-evict: "true"`` on the NodePool the node goes away, and the
Service in front of the Deployment never has zero ready endpoints (its EndpointSlices
read every 100 ms through the whole removal)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest
from harness import karpy_operator
from kube import clean_up, connect, eventually
from test_disruption import _one_pod_left_on_a_big_node, running, settings

from karpy.controllers.surge import ANNOTATION_RESTARTED_AT, ANNOTATION_SURGE_BEFORE_EVICT
from karpy.runtime import Client, Kind, errors, kinds
from karpy.state.kinds import NODE_POOL

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ENDPOINT_SLICE = Kind(group="discovery.k8s.io", version="v1", plural="endpointslices",
                      kind="EndpointSlice")


async def ready_endpoints(client: Client, namespace: str, service: str) -> list[str]:
    """The pod names behind the Service's ready endpoints, as kube-proxy would route."""
    slices = await client.list(ENDPOINT_SLICE, namespace=namespace,
                               label_selector={"kubernetes.io/service-name": service})
    return [
        str((e.get("targetRef") or {}).get("name"))
        for s in slices for e in s.get("endpoints") or ()
        if (e.get("conditions") or {}).get("ready")
    ]


class EndpointWatch:
    """Reads the Service's ready endpoints every 100 ms; counts the reads that found
    none, keeps the longest stretch of them and every pod name seen ready."""

    def __init__(self, client: Client, namespace: str, service: str) -> None:
        self.client, self.namespace, self.service = client, namespace, service
        self.reads = 0
        self.empty_reads = 0
        self.longest_empty = 0.0
        self.seen: set[str] = set()

    async def run(self) -> None:
        empty_since: float | None = None
        while True:
            ready = await ready_endpoints(self.client, self.namespace, self.service)
            now = time.monotonic()
            self.reads += 1
            self.seen.update(ready)
            if ready:
                empty_since = None
            else:
                self.empty_reads += 1
                empty_since = empty_since or now
                self.longest_empty = max(self.longest_empty, now - empty_since)
            await asyncio.sleep(0.1)


async def test_a_single_replica_behind_a_zero_pdb_moves_without_downtime(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    pool, app = "surge", "surge"
    async with connect(cluster) as client, karpy_operator(cluster, settings=settings()) as op:
        watch_task: asyncio.Task[None] | None = None
        try:
            await client.create(kinds.POD_DISRUPTION_BUDGET, {
                "metadata": {"name": app},
                "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": app}}},
            }, namespace=namespace)
            await client.create(kinds.SERVICE, {
                "metadata": {"name": app},
                "spec": {"selector": {"app": app}, "ports": [{"port": 80}]},
            }, namespace=namespace)
            node = await _one_pod_left_on_a_big_node(client, namespace, pool, app, {})
            [first] = await eventually(lambda: running(client, namespace, app, 1), timeout=60,
                                       what="one pod Running")
            await eventually(lambda: _only(client, namespace, app, first), timeout=60,
                             what="the Service's one ready endpoint, the remaining pod")
            watch = EndpointWatch(client, namespace, app)
            watch_task = asyncio.create_task(watch.run())
            # Opt in only now: until here the zero PDB keeps the node, as in Karpenter.
            await client.patch(NODE_POOL, pool, {"metadata": {"annotations": {
                ANNOTATION_SURGE_BEFORE_EVICT: "true"}}})
            opted = time.monotonic()

            async def gone() -> bool | None:
                try:
                    await client.get(kinds.NODE, node)
                except errors.NotFound:
                    return True
                return None

            await eventually(gone, timeout=180, what=f"the consolidated node {node} gone")
            removed_after = time.monotonic() - opted
            [moved] = await eventually(lambda: running(client, namespace, app, 1), timeout=30,
                                       what="the replacement pod Running")
            await eventually(lambda: _only(client, namespace, app, moved), timeout=30,
                             what="the replacement pod the Service's one ready endpoint")
            watch_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch_task

            assert watch.reads > 50, f"only {watch.reads} reads of the EndpointSlices"
            assert watch.empty_reads == 0, (
                f"{watch.empty_reads} of {watch.reads} reads found no ready endpoint "
                f"(the longest stretch {watch.longest_empty:.2f} s)")
            print(f"\nsurge before evict: node gone {removed_after:.1f} s after the opt-in; "
                  f"{watch.reads} reads of the EndpointSlices, {watch.empty_reads} with no "
                  f"ready endpoint")
            name = moved["metadata"]["name"]
            assert name != first["metadata"]["name"]
            assert moved["spec"]["nodeName"] != node
            assert {first["metadata"]["name"], name} <= watch.seen
            surged = await eventually(
                lambda: pod_events(client, namespace, first, "SurgingBeforeEviction"),
                timeout=15, what="a SurgingBeforeEviction event on the pod that moved")
            assert f"Deployment {namespace}/{app}" in surged[0]["message"]
            # Nothing evicted it: the Deployment controller replaced it.
            assert not await pod_events(client, namespace, first, "Evicted")
            got = await client.get(kinds.DEPLOYMENT, app, namespace=namespace)
            assert ANNOTATION_RESTARTED_AT in got["spec"]["template"]["metadata"]["annotations"]
            assert op.messages("surging before eviction")
        finally:
            if watch_task is not None:
                watch_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch_task
            for kind in (kinds.POD_DISRUPTION_BUDGET, kinds.SERVICE):
                with contextlib.suppress(errors.NotFound):
                    await client.delete(kind, app, namespace=namespace)
            assert await clean_up(client, namespace, app, [pool], timeout=120) == []


async def pod_events(client: Client, namespace: str, pod: Any, reason: str) -> list[Any]:
    """Events of ``reason`` about the pod (recorded in its namespace)."""
    name = pod["metadata"]["name"]
    return [e for e in await client.list(kinds.EVENT, namespace=namespace)
            if e["involvedObject"].get("name") == name and e["reason"] == reason]


async def _only(client: Client, namespace: str, app: str, pod: Any) -> bool | None:
    ready = await ready_endpoints(client, namespace, app)
    return True if ready == [pod["metadata"]["name"]] else None
