"""End to end: a pod's persistent volume decides the zone of the node karpy buys for it.

A local PersistentVolume whose node affinity allows only test-zone-b is pre-bound to a
claim (the kube-controller-manager's PV controller completes the binding); a pod using
the claim makes karpy create a NodeClaim restricted to test-zone-b, and kube-scheduler
(whose VolumeBinding plugin checks the volume's affinity) binds the pod to that node,
where kwok runs it. A pod whose claim does not exist gets karpy's "failed to validate
pod" event and no NodeClaim.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

import pytest
from harness import karpy_operator

from karpy.controllers.settings import Settings
from karpy.runtime import Client, Kind, errors, kinds
from karpy.state import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster]

T = TypeVar("T")

KWOK_NODE_CLASS = Kind(group="karpenter.kwok.sh", version="v1alpha1", plural="kwoknodeclasses",
                       kind="KWOKNodeClass", namespaced=False)
NODE_CLASS = "volume-topology-e2e"
POOL = "vol-topology"
SELECT = "karpy-e2e-volume-topology"   # the template label this file's pods select by
ZONE = "topology.kubernetes.io/zone"
VOLUME_ZONE = "test-zone-b"


async def eventually(
    check: Callable[[], Awaitable[T | None]],
    *,
    timeout: float,  # noqa: ASYNC109 - a deadline for the polling, not an I/O timeout
    what: str,
    every: float = 0.5,
) -> T:
    """Poll ``check`` until it returns something truthy; fail naming ``what``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        found = await check()
        if found:
            return found
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(every)


@contextlib.asynccontextmanager
async def kube(cluster: Any) -> AsyncIterator[Client]:
    client = await Client.from_kubeconfig(cluster.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


def nodepool() -> dict[str, Any]:
    return {
        "metadata": {"name": POOL},
        "spec": {
            "template": {
                "metadata": {"labels": {SELECT: "true"}},
                "spec": {
                    "nodeClassRef": {"group": KWOK_NODE_CLASS.group,
                                     "kind": KWOK_NODE_CLASS.kind, "name": NODE_CLASS},
                    "requirements": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    ],
                    "expireAfter": "Never",
                },
            },
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"},
        },
    }


def local_volume(name: str, namespace: str, claim: str) -> dict[str, Any]:
    """A local PV usable only in VOLUME_ZONE, reserved for ``namespace/claim``."""
    return {
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "local": {"path": "/mnt/karpy-e2e"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": ZONE, "operator": "In", "values": [VOLUME_ZONE]},
            ]}]}},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                         "namespace": namespace, "name": claim},
        },
    }


def claim(name: str, volume: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "",
            "volumeName": volume,
        },
    }


def pod_using(name: str, claim_name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {SELECT: "true"},
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                            "resources": {"requests": {"cpu": "100m"}}}],
            "volumes": [{"name": "data",
                         "persistentVolumeClaim": {"claimName": claim_name}}],
        },
    }


def pool_of(obj: Mapping[str, Any]) -> str:
    return str((obj["metadata"].get("labels") or {}).get("karpenter.sh/nodepool", ""))


def zone_requirement(nodeclaim: Mapping[str, Any]) -> list[str] | None:
    for requirement in nodeclaim["spec"]["requirements"]:
        if requirement["key"] == ZONE and requirement["operator"] == "In":
            return sorted(requirement["values"])
    return None


async def delete(client: Client, kind: Kind, name: str, namespace: str | None = None) -> None:
    with contextlib.suppress(errors.NotFound):
        await client.delete(kind, name, namespace=namespace)


async def test_a_pod_gets_a_node_in_the_zone_of_its_persistent_volume(
    cluster: Any, namespace: str
) -> None:
    volume = f"karpy-e2e-{namespace}"[:63]
    settings = Settings(batch_idle_duration=0.5, batch_max_duration=3.0)
    async with kube(cluster) as client, karpy_operator(cluster, settings=settings) as op:
        with contextlib.suppress(errors.AlreadyExists):
            await client.create(KWOK_NODE_CLASS, {"metadata": {"name": NODE_CLASS}, "spec": {}})
        await client.create(NODE_POOL, nodepool())
        forced: list[str] = []
        try:
            await client.create(kinds.PERSISTENT_VOLUME, local_volume(volume, namespace, "data"))
            await client.create(kinds.PERSISTENT_VOLUME_CLAIM, claim("data", volume),
                                namespace=namespace)

            async def bound() -> bool:
                pvc = await client.get(kinds.PERSISTENT_VOLUME_CLAIM, "data",
                                       namespace=namespace)
                return (pvc.get("status") or {}).get("phase") == "Bound"

            await eventually(bound, timeout=60, what="the PV controller to bind the claim")

            await client.create(kinds.POD, pod_using("db", "data"), namespace=namespace)
            await client.create(kinds.POD, pod_using("orphan", "missing"), namespace=namespace)

            async def running() -> dict[str, Any] | None:
                pod = await client.get(kinds.POD, "db", namespace=namespace)
                return pod if (pod.get("status") or {}).get("phase") == "Running" else None

            pod = await eventually(running, timeout=120, what="pod db Running")
            node = await client.get(kinds.NODE, pod["spec"]["nodeName"])
            assert pool_of(node) == POOL
            assert node["metadata"]["labels"][ZONE] == VOLUME_ZONE

            [nodeclaim] = [nc for nc in await client.list(NODE_CLAIM) if pool_of(nc) == POOL]
            assert zone_requirement(nodeclaim) == [VOLUME_ZONE]
            assert nodeclaim["status"]["nodeName"] == node["metadata"]["name"]

            # The pod whose claim does not exist is left out, with karpy's event.
            async def validation_event() -> list[Any]:
                return [e for e in await client.list(kinds.EVENT, namespace=namespace)
                        if e["involvedObject"]["name"] == "orphan"
                        and e["reason"] == "FailedScheduling"
                        and e["message"].startswith(
                            "Failed to schedule pod, failed to validate pod, "
                            f'persistentvolumeclaim "{namespace}/missing"')]

            await eventually(validation_event, timeout=60, what="the orphan pod's event")
            [line, *_] = await op.wait_for_log(
                "ignoring pod, failed to validate pod",
                where=lambda r: r["Pod"] == {"name": "orphan", "namespace": namespace})
            assert "not found" in line["error"]
            orphan = await client.get(kinds.POD, "orphan", namespace=namespace)
            assert not orphan["spec"].get("nodeName")
        finally:
            forced = await clean_up(client, namespace, volume)
        assert forced == [], f"termination left these behind: {forced}"


async def clean_up(client: Client, namespace: str, volume: str) -> list[str]:
    """Delete the pods, claim, volume, NodePool and NodeClaims while karpy still runs;
    wait for termination. Returns what had to be forced (should be nothing)."""
    for name in ("db", "orphan"):
        await delete(client, kinds.POD, name, namespace)
    await delete(client, kinds.PERSISTENT_VOLUME_CLAIM, "data", namespace)
    await delete(client, kinds.PERSISTENT_VOLUME, volume)
    await delete(client, NODE_POOL, POOL)
    for nc in await client.list(NODE_CLAIM):
        if pool_of(nc) == POOL:
            await delete(client, NODE_CLAIM, nc["metadata"]["name"])

    async def all_gone() -> bool:
        claims = [nc for nc in await client.list(NODE_CLAIM) if pool_of(nc) == POOL]
        nodes = [n for n in await client.list(kinds.NODE) if pool_of(n) == POOL]
        with contextlib.suppress(errors.NotFound):
            await client.get(kinds.PERSISTENT_VOLUME, volume)
            return False
        return not claims and not nodes

    forced: list[str] = []
    try:
        await eventually(all_gone, timeout=180, what="NodeClaims, Nodes and the PV to go")
    except AssertionError:
        for kind in (NODE_CLAIM, kinds.NODE):
            for obj in await client.list(kind):
                if pool_of(obj) == POOL:
                    name = obj["metadata"]["name"]
                    forced.append(f"{kind.kind}/{name}")
                    with contextlib.suppress(errors.NotFound):
                        await client.patch(kind, name, {"metadata": {"finalizers": None}})
                        await client.delete(kind, name)
        with contextlib.suppress(errors.NotFound):
            await client.get(kinds.PERSISTENT_VOLUME, volume)
            forced.append(f"PersistentVolume/{volume}")
            await client.patch(kinds.PERSISTENT_VOLUME, volume,
                               {"metadata": {"finalizers": None}})
    return forced
