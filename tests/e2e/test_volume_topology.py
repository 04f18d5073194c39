"""End to end: a pod's persistent volume decides the zone of the node karpy buys for it.

A local PersistentVolume whose node affinity allows only test-zone-b is pre-bound to a
claim (the kube-controller-manager's PV controller completes the binding); a pod using
the claim makes karpy create a NodeClaim restricted to test-zone-b, and kube-scheduler
(whose VolumeBinding plugin checks the volume's affinity) binds the pod to that node,
where kwok runs it. A pod whose claim does not exist gets karpy's "failed to validate
pod" event and no NodeClaim.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import pytest
from harness import karpy_operator
from kube import (
    clean_up,
    connect,
    eventually,
    gone,
    nodepool,
    pool_objects,
    pool_of,
    ready_node_class,
)

from karpy.controllers.settings import Settings
from karpy.runtime import Client, Kind, errors, kinds
from karpy.state import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster]

NODE_CLASS = "volume-topology-e2e"
POOL = "vol-topology"
SELECT = "karpy-e2e-volume-topology"   # the template label this file's pods select by
ZONE = "topology.kubernetes.io/zone"
VOLUME_ZONE = "test-zone-b"


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


def zone_requirement(nodeclaim: Mapping[str, Any]) -> list[str] | None:
    for requirement in nodeclaim["spec"]["requirements"]:
        if requirement["key"] == ZONE and requirement["operator"] == "In":
            return sorted(requirement["values"])
    return None


async def delete(client: Client, kind: Kind, name: str, namespace: str | None = None) -> None:
    with contextlib.suppress(errors.NotFound):
        await client.delete(kind, name, namespace=namespace)


async def test_a_pod_gets_a_node_in_the_zone_of_its_persistent_volume(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    volume = f"karpy-e2e-{namespace}"[:63]
    settings = Settings(batch_idle_duration=0.5, batch_max_duration=3.0)
    async with connect(cluster) as client, karpy_operator(cluster, settings=settings) as op:
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, nodepool(POOL, node_class=NODE_CLASS,
                                                labels={SELECT: "true"}))
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

            [nodeclaim] = await pool_objects(client, NODE_CLAIM, [POOL])
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
            forced = await clean_up_volumes(client, namespace, volume)
        assert forced == [], f"termination left these behind: {forced}"


async def clean_up_volumes(client: Client, namespace: str, volume: str) -> list[str]:
    """Delete the pods, the claim and the volume, then the NodePool and its NodeClaims
    (while karpy still runs). Returns what had to be forced (should be nothing)."""
    for name in ("db", "orphan"):
        await delete(client, kinds.POD, name, namespace)
    await delete(client, kinds.PERSISTENT_VOLUME_CLAIM, "data", namespace)
    await delete(client, kinds.PERSISTENT_VOLUME, volume)
    # No Deployment here (bare pods): clean_up finds none by this name and moves on.
    forced = await clean_up(client, namespace, "no-deployment", [POOL], timeout=180)
    try:
        await eventually(lambda: gone(client, kinds.PERSISTENT_VOLUME, volume), timeout=60,
                         what=f"persistentvolume {volume} to be deleted")
    except AssertionError:
        forced.append(f"PersistentVolume/{volume}")
        with contextlib.suppress(errors.NotFound):
            await client.patch(kinds.PERSISTENT_VOLUME, volume,
                               {"metadata": {"finalizers": None}})
    return forced
