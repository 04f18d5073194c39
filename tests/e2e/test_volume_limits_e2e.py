"""Volume attachment limits (issue 41, item 3; Karpenter v1.15's VolumeAttachmentLimits):
no node is planned with more volumes than it can attach.

Forty pods each mount their own EBS-CSI volume (statically provisioned PVs bound to
claims); every instance type of the kwok provider attaches 16 volumes of that driver
(its ``volumeAttachmentLimits`` setting, as karpy-aws's types declare their EBS limit).
The pods are small: one node could hold all forty by CPU and memory. The test plays the
CSI node plugin: each new node gets a CSINode publishing 16 attachable volumes, and its
startup taint (``ebs.csi.aws.com/agent-not-ready``, the driver's own) is removed, so
kube-scheduler's NodeVolumeLimits plugin enforces the same limit. karpy must plan at
least three nodes at once and every pod must run: a planner that packs the forty
together leaves 24 pods pending on a full node (kube-scheduler: "exceed max volume
count"), and karpy before this change thought they fit there and bought nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from typing import Any

import pytest
from harness import karpy_operator
from kube import clean_up, connect, eventually, nodepool, pool_objects, pool_of, ready_node_class

from karpy.controllers.settings import Settings
from karpy.runtime import Kind, KubeClient, errors, kinds
from karpy.state import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster]

NODE_CLASS = "volume-limits-e2e"
POOL = "vol-limits"
SELECT = "karpy-e2e-volume-limits"
DRIVER = "ebs.csi.aws.com"
LIMIT, PODS = 16, 40
AGENT_NOT_READY = {"key": f"{DRIVER}/agent-not-ready", "effect": "NoSchedule"}
UNREGISTERED = "karpenter.sh/unregistered"
CSI_DRIVER = Kind(group="storage.k8s.io", version="v1", plural="csidrivers",
                  kind="CSIDriver", namespaced=False)


def volume(name: str, namespace: str, claim: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "csi": {"driver": DRIVER, "volumeHandle": f"vol-{name}"},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                         "namespace": namespace, "name": claim},
        },
    }


def claim(name: str, volume_name: str) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                     "resources": {"requests": {"storage": "1Gi"}}, "volumeName": volume_name}}


def pod(name: str, claim_name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": "vol-limits"}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {SELECT: "true"},
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}],
        },
    }


async def csi_node_plugin(client: KubeClient, stop: asyncio.Event) -> None:
    """What the EBS CSI node plugin does on each new node: publish its CSINode with the
    attachable count, then remove its startup taint."""
    while not stop.is_set():
        for node in await pool_objects(client, kinds.NODE, [POOL]):
            name = node["metadata"]["name"]
            with contextlib.suppress(errors.AlreadyExists):
                await client.create(kinds.CSI_NODE, {
                    "metadata": {"name": name},
                    "spec": {"drivers": [{"name": DRIVER, "nodeID": name,
                                          "allocatable": {"count": LIMIT}}]},
                })
            taints = (node.get("spec") or {}).get("taints") or []
            if any(t.get("key") == UNREGISTERED for t in taints):
                continue  # karpy registers it first; its taint patch must not race ours
            kept = [t for t in taints if t.get("key") != AGENT_NOT_READY["key"]]
            if kept != taints:
                # the whole list is written: guarded by the version read, so a taint
                # someone else changed meanwhile is never put back (Conflict: next round)
                with contextlib.suppress(errors.NotFound, errors.Conflict):
                    await client.patch(kinds.NODE, name, {
                        "metadata": {"resourceVersion": node["metadata"]["resourceVersion"]},
                        "spec": {"taints": kept}})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=0.5)


async def test_no_node_is_planned_with_more_volumes_than_it_attaches(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    settings = Settings(batch_idle_duration=0.5, batch_max_duration=3.0)
    names = [f"{namespace}-v{i}"[:63] for i in range(PODS)]
    async with connect(cluster) as client, karpy_operator(
        cluster, settings=settings,
        provider_settings={"volumeAttachmentLimits": f"{DRIVER}={LIMIT}"},
    ) as op:
        await ready_node_class(client, NODE_CLASS)
        # attachRequired false: no VolumeAttachment waits on a kwok node's drain
        with contextlib.suppress(errors.AlreadyExists):
            await client.create(CSI_DRIVER, {"metadata": {"name": DRIVER},
                                             "spec": {"attachRequired": False}})
        pool = nodepool(POOL, node_class=NODE_CLASS, labels={SELECT: "true"})
        pool["spec"]["template"]["spec"]["startupTaints"] = [AGENT_NOT_READY]
        await client.create(NODE_POOL, pool)
        stop = asyncio.Event()
        plugin = asyncio.create_task(csi_node_plugin(client, stop))
        try:
            for i, name in enumerate(names):
                await client.create(kinds.PERSISTENT_VOLUME, volume(name, namespace, f"d{i}"))
                await client.create(kinds.PERSISTENT_VOLUME_CLAIM, claim(f"d{i}", name),
                                    namespace=namespace)

            async def all_bound() -> bool:
                claims = await client.list(kinds.PERSISTENT_VOLUME_CLAIM, namespace=namespace)
                bound = [c for c in claims if (c.get("status") or {}).get("phase") == "Bound"]
                return len(bound) == PODS

            await eventually(all_bound, timeout=90, what="the PV controller to bind the claims")
            began = time.monotonic()
            for i in range(PODS):
                await client.create(kinds.POD, pod(f"db-{i}", f"d{i}"), namespace=namespace)

            async def running() -> list[Any] | None:
                pods = await client.list(kinds.POD, namespace=namespace)
                up = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
                return up if len(up) == PODS else None

            pods = await eventually(running, timeout=180, what=f"all {PODS} pods Running")
            took = time.monotonic() - began
            per_node = Counter(p["spec"]["nodeName"] for p in pods)
            claims = await pool_objects(client, NODE_CLAIM, [POOL])
            first = [r for r in op.messages("computed new nodeclaim(s) to fit pod(s)")]
            print(f"\nvolume limits: {PODS} pods with a volume each on {len(per_node)} nodes "
                  f"({sorted(per_node.values())} pods), {len(claims)} NodeClaims, the first "
                  f"batch planned {first[0]['nodeclaims'] if first else '?'}; all Running "
                  f"{took:.1f} s after the pods were created")
            assert len(per_node) >= 3, per_node
            assert max(per_node.values()) <= LIMIT, per_node
            for node in per_node:
                assert pool_of(await client.get(kinds.NODE, node)) == POOL
            assert first and int(first[0]["nodeclaims"]) >= 3, first[:1]
        finally:
            stop.set()
            await plugin
            for i in range(PODS):
                with contextlib.suppress(errors.NotFound):
                    await client.delete(kinds.POD, f"db-{i}", namespace=namespace)
            forced = await clean_up(client, namespace, "vol-limits", [POOL], timeout=90)
            for name in names:
                with contextlib.suppress(errors.NotFound):
                    await client.delete(kinds.PERSISTENT_VOLUME, name)
            for csinode in await client.list(kinds.CSI_NODE):
                if csinode["metadata"]["name"].startswith(POOL):
                    with contextlib.suppress(errors.NotFound):
                        await client.delete(kinds.CSI_NODE, csinode["metadata"]["name"])
            assert forced == []
