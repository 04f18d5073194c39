"""End to end: NodeOverlay (issue 27) with the kwok provider on the local cluster.

One karpy (in-process, ``NodeOverlay=true``) and one NodePool of two on-demand kwok
types, a 1-vCPU and an 8-vCPU one, serve three checks in turn:

* a price overlay that makes the 8-vCPU type cheaper than the 1-vCPU one changes the type
  launched for a small pod (without it the 1-vCPU type is the cheapest that fits);
* a capacity overlay that gives the 1-vCPU type an extended resource lets a pod that
  requests it get a NodeClaim (without it the pod fits no type) and run: kwok's node
  advertises what its NodeClaim requests, as Karpenter's kwok provider does (a real node
  would run a device plugin);
* two overlays of equal weight pricing the same type: the one Karpenter orders second
  reports ``ValidationSucceeded=False`` with reason ``Conflict``; the other stays True.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import pytest
from harness import karpy_operator
from kube import clean_up, connect, eventually, nodepool, pool_objects, ready_node_class

from karpy.controllers.settings import FeatureGates, Settings
from karpy.runtime import Client, errors, kinds
from karpy.state.kinds import NODE_CLAIM, NODE_OVERLAY, NODE_POOL

pytestmark = pytest.mark.cluster

NODE_CLASS = "overlay-e2e"
POOL = "overlay-e2e"
SELECT = "karpy-e2e-overlay"
SMALL, LARGE = "c-1x-amd64-linux", "c-8x-amd64-linux"
TYPE = "node.kubernetes.io/instance-type"
DEVICE = "example.com/overlay-device"
CLEANUP_TIMEOUT = 120.0


def overlay(name: str, types: list[str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": name},
        "spec": {"requirements": [{"key": TYPE, "operator": "In", "values": types}], **spec},
    }


def pause_pod(name: str, requests: Mapping[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {SELECT: POOL},
            "containers": [{
                "name": "pause",
                "image": "registry.k8s.io/pause:3.9",
                "resources": {"requests": dict(requests), "limits": {
                    k: v for k, v in requests.items() if "/" in k}},
            }],
        },
    }


async def validation(client: Client, name: str) -> tuple[str, str] | None:
    """ValidationSucceeded's (status, reason) once the controller wrote it."""
    found = await client.get(NODE_OVERLAY, name)
    for condition in (found.get("status") or {}).get("conditions") or ():
        if condition["type"] == "ValidationSucceeded":
            return condition["status"], condition["reason"]
    return None


async def in_force(client: Client, name: str) -> None:
    async def judged() -> bool:
        return await validation(client, name) == ("True", "ValidationSucceeded")

    await eventually(judged, timeout=60, what=f"NodeOverlay {name} ValidationSucceeded")


async def new_nodeclaim(client: Client, known: set[str]) -> dict[str, Any]:
    """The pool's launched NodeClaim that is not in ``known`` (then added to it): each
    step creates one pod that fits no existing node, so one new NodeClaim is its own."""

    async def launched() -> dict[str, Any] | None:
        for nc in await pool_objects(client, NODE_CLAIM, [POOL]):
            if nc["metadata"]["name"] not in known and TYPE in nc["metadata"].get("labels", {}):
                return dict(nc)
        return None

    found: dict[str, Any] = await eventually(launched, timeout=90, what="a new NodeClaim")
    known.add(found["metadata"]["name"])
    return found


async def running(client: Client, namespace: str, name: str) -> bool:
    pod = await client.get(kinds.POD, name, namespace=namespace)
    return (pod.get("status") or {}).get("phase") == "Running"


async def test_overlays_change_price_capacity_and_report_conflicts(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    settings = Settings(feature_gates=FeatureGates(node_overlay=True))
    overlays = ["cheap-large", "devices", "conflict-a", "conflict-b"]
    async with connect(cluster) as client, karpy_operator(cluster, settings=settings):
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, nodepool(
            POOL, node_class=NODE_CLASS, labels={SELECT: POOL},
            requirements=[{"key": TYPE, "operator": "In", "values": [SMALL, LARGE]},
                          {"key": "karpenter.sh/capacity-type", "operator": "In",
                           "values": ["on-demand"]}]))
        known: set[str] = set()
        try:
            # 1. price: the 8-vCPU type at $0.001/h is now the cheapest that fits
            await client.create(NODE_OVERLAY, overlay("cheap-large", [LARGE], price="0.001"))
            await in_force(client, "cheap-large")
            await client.create(kinds.POD, pause_pod("priced", {"cpu": "100m"}),
                                namespace=namespace)
            claim = await new_nodeclaim(client, known)
            assert claim["metadata"]["labels"][TYPE] == LARGE

            # 2. capacity: only the overlay says the 1-vCPU type has the device
            await client.create(NODE_OVERLAY, overlay("devices", [SMALL],
                                                      capacity={DEVICE: "2"}))
            await in_force(client, "devices")
            await client.create(kinds.POD, pause_pod("device", {"cpu": "100m", DEVICE: "1"}),
                                namespace=namespace)
            claim = await new_nodeclaim(client, known)
            assert claim["metadata"]["labels"][TYPE] == SMALL
            assert claim["spec"]["resources"]["requests"][DEVICE] == "1"

            # kwok's node advertises what its NodeClaim requests (a device plugin's part)
            await eventually(lambda: running(client, namespace, "device"), timeout=90,
                             what="the pod requesting the device Running")
            pod = await client.get(kinds.POD, "device", namespace=namespace)
            node = await client.get(kinds.NODE, pod["spec"]["nodeName"])
            assert node["metadata"]["labels"][TYPE] == SMALL

            # 3. conflict: equal weights, same type priced twice
            await client.create(NODE_OVERLAY, overlay("conflict-a", [SMALL], price="0.5",
                                                      weight=7))
            await client.create(NODE_OVERLAY, overlay("conflict-b", [SMALL],
                                                      priceAdjustment="-10%", weight=7))

            async def judged() -> tuple[Any, Any] | None:
                a = await validation(client, "conflict-a")
                b = await validation(client, "conflict-b")
                return (a, b) if a and b and a[0] == "False" else None

            a, b = await eventually(judged, timeout=60, what="the conflict reported")
            assert a == ("False", "Conflict")
            assert b == ("True", "ValidationSucceeded")
            assert await validation(client, "cheap-large") == ("True", "ValidationSucceeded")
        finally:
            for name in overlays:
                with contextlib.suppress(errors.NotFound):
                    await client.delete(NODE_OVERLAY, name)
            for name in ("priced", "device"):
                with contextlib.suppress(errors.NotFound):
                    await client.delete(kinds.POD, name, namespace=namespace,
                                        grace_period_seconds=0)
            forced = await clean_up(client, namespace, "none", [POOL],
                                    timeout=CLEANUP_TIMEOUT)
            assert forced == [], f"termination left these behind: {forced}"
