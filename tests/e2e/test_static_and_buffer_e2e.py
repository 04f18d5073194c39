"""End to end: static NodePools and CapacityBuffers (Karpenter's StaticCapacity and
CapacityBuffer gates) on the local cluster, one karpy per test.

Issue 27: a NodePool with ``replicas: 3`` gets 3 nodes with no pod asking for them;
``kubectl scale nodepool --replicas 5`` (the CRD's scale subresource) gives 5, and back
to 2 removes 3; a change of its template replaces the drifted nodes one at a time under
a budget of one node, never more than one node beyond the replicas.

A CapacityBuffer of two chunks keeps room for two more pods free on a consolidating
NodePool: before any pod, while real pods arrive (and take the room: more is bought),
and after they leave, when consolidation removes what is left but never the headroom.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest
from harness import karpy_operator
from kube import (
    clean_up,
    connect,
    deployment,
    eventually,
    nodepool,
    pool_objects,
    ready_node_class,
    running_pods,
)

from karpy.controllers.capacitybuffer import CAPACITY_BUFFER, POD_TEMPLATE
from karpy.controllers.settings import FeatureGates, Settings
from karpy.runtime import Client, errors, kinds
from karpy.scheduling import resources as res
from karpy.scheduling.pod import pod_requests
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NODE_CLASS = "static-e2e"
SELECT = "karpy-e2e"
SETTINGS = Settings(
    batch_idle_duration=0.5, batch_max_duration=3.0, eviction_retry=1.0,
    disruption_validation_delay=3.0, disruption_poll_period=2.0,
    feature_gates=FeatureGates(static_capacity=True, capacity_buffer=True),
)  # fmt: skip


def _ready(node: Any) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in (node.get("status") or {}).get("conditions") or ())  # fmt: skip


async def fleet(client: Client, pool: str, replicas: int) -> list[str] | None:
    """The pool's Node names once exactly ``replicas`` NodeClaims and as many Ready
    Nodes exist, none of them being deleted."""
    claims = await pool_objects(client, NODE_CLAIM, [pool])
    nodes = await pool_objects(client, kinds.NODE, [pool])
    if len(claims) != replicas or len(nodes) != replicas:
        return None
    if any(o["metadata"].get("deletionTimestamp") for o in [*claims, *nodes]):
        return None
    if not all(_ready(n) for n in nodes):
        return None
    return sorted(n["metadata"]["name"] for n in nodes)


def _being_replaced(node: Any, claim: Any | None) -> bool:
    taints = (node.get("spec") or {}).get("taints") or []
    return (any(t["key"] == "karpenter.sh/disrupted" for t in taints)
            or bool(node["metadata"].get("deletionTimestamp"))
            or bool(claim is not None and claim["metadata"].get("deletionTimestamp")))  # fmt: skip


async def test_a_static_nodepool_keeps_scales_and_rolls_its_replicas(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    pool = "static-pool"
    spec = nodepool(pool, node_class=NODE_CLASS, labels={SELECT: pool}, requirements=[
        {"key": "karpenter.kwok.sh/instance-cpu", "operator": "Lt", "values": ["5"]},
    ])  # fmt: skip
    spec["spec"]["replicas"] = 3
    spec["spec"]["disruption"]["budgets"] = [{"nodes": "1"}]
    async with connect(cluster) as client, karpy_operator(cluster, settings=SETTINGS) as op:
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, spec)
        try:
            # 1. Three nodes, no pod at all in the pool's namespace or on its nodes.
            await eventually(lambda: fleet(client, pool, 3), timeout=90, what="3 static nodes")
            assert not await client.list(kinds.POD, namespace=namespace)
            assert op.messages("provisioning nodeclaims to satisfy replica count")
            # status.nodes is the scale subresource's status replicas.
            scale = cluster.kubectl_json("get", "nodepool", pool, "--subresource", "scale")

            async def scale_status() -> bool:
                got = cluster.kubectl_json("get", "nodepool", pool, "--subresource", "scale")
                return bool(got["status"].get("replicas") == 3)

            await eventually(scale_status, timeout=30, what="the scale status to say 3")
            assert scale["spec"]["replicas"] == 3

            # 2. kubectl scale, up then down.
            cluster.kubectl("scale", "nodepool", pool, "--replicas=5")
            await eventually(lambda: fleet(client, pool, 5), timeout=90, what="5 static nodes")
            await asyncio.sleep(3)  # a controller counting wrongly would overshoot by now
            assert await fleet(client, pool, 5), "more than 5 NodeClaims after scaling to 5"
            cluster.kubectl("scale", "nodepool", pool, "--replicas=2")
            originals = await eventually(lambda: fleet(client, pool, 2), timeout=90,
                                         what="2 static nodes after scaling down")  # fmt: skip

            # 3. A template change drifts both; a budget of one replaces them in turn.
            await client.patch(NODE_POOL, pool, {"spec": {"template": {"metadata": {
                "labels": {SELECT: pool, "rollout": "v2"}}}}})
            worst, most = 0, 0
            deadline = time.monotonic() + 180
            while True:
                nodes = {n["metadata"]["name"]: n
                         for n in await pool_objects(client, kinds.NODE, [pool])}
                claims = await pool_objects(client, NODE_CLAIM, [pool])
                by_node = {(c.get("status") or {}).get("nodeName"): c for c in claims}
                left = [n for n in originals if n in nodes]
                worst = max(worst, sum(_being_replaced(nodes[n], by_node.get(n)) for n in left))
                most = max(most, len([c for c in claims
                                      if not c["metadata"].get("deletionTimestamp")]))
                if not left:
                    break
                assert time.monotonic() < deadline, f"drifted nodes still there: {left}"
                await asyncio.sleep(0.3)
            assert worst == 1, f"{worst} nodes were being replaced at once (budget: 1)"
            assert most <= 3, f"{most} live NodeClaims at once (replicas 2, budget 1)"
            drifted = [r for r in op.messages("disrupting node(s)") if r.get("reason") == "Drifted"]
            assert len(drifted) == 2
            renewed = await eventually(lambda: fleet(client, pool, 2), timeout=60,
                                       what="2 replacement nodes")  # fmt: skip
            assert not set(renewed) & set(originals)
            for node in await pool_objects(client, kinds.NODE, [pool]):
                assert node["metadata"]["labels"].get("rollout") == "v2"
        finally:
            assert await clean_up(client, namespace, "none", [pool], timeout=120) == []


CHUNK = {"cpu": "500m", "memory": "256Mi"}


async def headroom(client: Client, pool: str) -> int:
    """How many CHUNK-sized pods the pool's Ready, not deleting nodes could still take."""
    chunk = res.parse_resource_list(CHUNK)
    pods = await client.list(kinds.POD)
    total = 0
    for node in await pool_objects(client, kinds.NODE, [pool]):
        if node["metadata"].get("deletionTimestamp") or not _ready(node):
            continue
        free = dict(res.parse_resource_list(node["status"]["allocatable"]))
        for pod in pods:
            if (pod["spec"].get("nodeName") == node["metadata"]["name"]
                    and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed")):
                for name, amount in pod_requests(pod["spec"]).items():
                    free[name] = free.get(name, 0) - amount
        total += min(free.get(name, 0) // amount for name, amount in chunk.items())
    return total


async def test_a_capacity_buffer_keeps_its_headroom_through_arrivals_and_consolidation(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    pool, app = "buffer-pool", "buffer-web"
    spec = nodepool(pool, node_class=NODE_CLASS, labels={SELECT: pool}, requirements=[
        {"key": "karpenter.kwok.sh/instance-family", "operator": "In", "values": ["c"]},
        {"key": "karpenter.kwok.sh/instance-cpu", "operator": "Lt", "values": ["5"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ])  # fmt: skip
    spec["spec"]["disruption"] = {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                                  "consolidateAfter": "5s", "budgets": [{"nodes": "100%"}]}
    template = {"metadata": {"name": "chunk", "namespace": namespace}, "template": {
        "metadata": {"labels": {"app": "buffer-chunk"}},
        "spec": {"nodeSelector": {SELECT: pool}, "containers": [{
            "name": "pause", "image": "registry.k8s.io/pause:3.9",
            "resources": {"requests": dict(CHUNK)}}]}}}  # fmt: skip
    buffer = {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
              "metadata": {"name": "headroom", "namespace": namespace},
              "spec": {"podTemplateRef": {"name": "chunk"}, "replicas": 2}}
    async with connect(cluster) as client, karpy_operator(cluster, settings=SETTINGS) as op:
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, spec)
        try:
            await client.create(POD_TEMPLATE, template, namespace=namespace)
            await client.create(CAPACITY_BUFFER, buffer, namespace=namespace)

            # 1. Headroom before any pod: a node with room for two chunks, nothing on it.
            async def status(reason: str) -> dict[str, Any] | None:
                got = await client.get(CAPACITY_BUFFER, "headroom", namespace=namespace)
                conds = {c["type"]: c for c in got.get("status", {}).get("conditions") or ()}
                ok = (conds.get("ReadyForProvisioning", {}).get("status") == "True"
                      and conds.get("Provisioning", {}).get("reason") == reason)
                return dict(got) if ok else None

            got = await eventually(lambda: status("FitsExistingCapacity"), timeout=90,
                                   what="the buffer Provisioning=True on its new node")
            assert got["status"]["replicas"] == 2
            assert await headroom(client, pool) >= 2
            assert not [p for p in await client.list(kinds.POD, namespace=namespace)]

            # 2. Real pods arrive and take the room: it is bought again.
            await client.create(kinds.DEPLOYMENT, deployment(
                app, node_selector={SELECT: pool}, replicas=4, cpu="500m"),
                namespace=namespace)  # fmt: skip
            await eventually(lambda: running_pods(client, namespace, app, 4), timeout=120,
                             what="4 pods Running")

            async def room() -> bool:
                return await headroom(client, pool) >= 2

            await eventually(room, timeout=90, what="room for 2 chunks beside the 4 pods")

            # 3. The pods leave; consolidation removes what is spare but not the headroom.
            await client.patch(kinds.DEPLOYMENT, app, {"spec": {"replicas": 0}},
                               namespace=namespace)  # fmt: skip
            worst = 99
            deadline = time.monotonic() + 45
            while time.monotonic() < deadline:
                worst = min(worst, await headroom(client, pool))
                await asyncio.sleep(0.5)
            assert worst >= 2, f"headroom fell to {worst} chunk(s) during consolidation"
            removed = [r for r in op.messages("disrupting node(s)")
                       if r.get("reason") in ("Empty", "Underutilized")]
            assert removed, "consolidation never ran: the spare capacity was kept too"
            assert await pool_objects(client, kinds.NODE, [pool]), "the headroom node went"
        finally:
            for kind, name in ((CAPACITY_BUFFER, "headroom"), (POD_TEMPLATE, "chunk")):
                with contextlib.suppress(errors.NotFound):
                    await client.delete(kind, name, namespace=namespace)
            assert await clean_up(client, namespace, app, [pool], timeout=120) == []
