"""In-place pod resize on the local cluster (issue 41, item 5; kubernetes-sigs/karpenter#829).

A pod grown in place (the ``resize`` subresource, InPlacePodVerticalScaling, on by default
since Kubernetes 1.33) holds its new requests on its node for kube-scheduler at once.
Karpenter, and karpy before this, counted a bound pod by the spec it had when first seen:
the node looked emptier than the scheduler saw it, a pending pod was planned onto it and
stayed Pending for ever. Here a 4-vCPU node runs one pod grown from 500m to 2500m (the
node agent has not actuated it yet: it still runs and is allocated 500m, which the
scheduler counts as 2500m); a pod of 2 vCPU then cannot go there, and karpy must launch
a node for it.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import pytest
from harness import karpy_operator
from kube import clean_up, connect, deployment, eventually, nodepool, ready_node_class, running_pods

from karpy.controllers.settings import Settings
from karpy.runtime import Client, PatchType, errors, kinds
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NODE_CLASS = "resize-e2e"
SELECT = "karpy-e2e"
INSTANCE_TYPE = "c-4x-amd64-linux"


async def _report_resources(client: Client, namespace: str, name: str, cpu: str) -> None:
    got = dict(await client.get(kinds.POD, name, namespace=namespace))
    status = copy.deepcopy(dict(got["status"]))
    for cs in status["containerStatuses"]:
        cs["resources"] = {"requests": {"cpu": cpu}}
        cs["allocatedResources"] = {"cpu": cpu}
    await client.update_status(kinds.POD, {**got, "status": status})


async def test_a_pod_grown_in_place_takes_its_new_room_on_the_node(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    pool, grown, newcomer = "resize", "resize-grown", "resize-new"
    settings = Settings(batch_idle_duration=0.5, batch_max_duration=3.0)
    async with connect(cluster) as client, karpy_operator(cluster, settings=settings) as op:
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, nodepool(
            pool, node_class=NODE_CLASS, labels={SELECT: pool}, requirements=[
                {"key": "node.kubernetes.io/instance-type", "operator": "In",
                 "values": [INSTANCE_TYPE]},
                {"key": "karpenter.sh/capacity-type", "operator": "In",
                 "values": ["on-demand"]}]))
        try:
            await client.create(kinds.DEPLOYMENT, deployment(
                grown, node_selector={SELECT: pool}, replicas=1, cpu="500m"),
                namespace=namespace)
            [pod] = await eventually(lambda: running_pods(client, namespace, grown, 1),
                                     timeout=90, what="the pod to grow Running")
            node = pod["spec"]["nodeName"]
            # kwok's node agent reports no container resources, so the API server would
            # refuse the resize ("Pod running on node without support for resize"): report
            # them as a resize-capable kubelet does once the container runs.
            await _report_resources(client, namespace, pod["metadata"]["name"], "500m")
            await client.patch(kinds.POD, pod["metadata"]["name"], [
                {"op": "replace", "path": "/spec/containers/0/resources/requests/cpu",
                 "value": "2500m"}], namespace=namespace, patch_type=PatchType.JSON,
                subresource="resize")

            async def resized() -> bool | None:
                got = await op.client.get(kinds.POD, pod["metadata"]["name"],
                                          namespace=namespace)
                cpu = got["spec"]["containers"][0]["resources"]["requests"]["cpu"]
                return True if cpu == "2500m" else None

            await eventually(resized, timeout=15, what="karpy's cache to see the resize")
            await client.create(kinds.DEPLOYMENT, deployment(
                newcomer, node_selector={SELECT: pool}, replicas=1, cpu="2"),
                namespace=namespace)
            [placed] = await eventually(
                lambda: running_pods(client, namespace, newcomer, 1), timeout=90,
                what="the 2-vCPU pod Running (on a new node: the grown pod fills the old)")
            assert placed["spec"]["nodeName"] != node
            claims = [c for c in await client.list(NODE_CLAIM)
                      if (c["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == pool]
            assert len(claims) == 2, [c["metadata"]["name"] for c in claims]
            [still] = await running_pods(client, namespace, grown, 1)
            assert still["spec"]["nodeName"] == node
        finally:
            with contextlib.suppress(errors.NotFound):
                await client.delete(kinds.DEPLOYMENT, newcomer, namespace=namespace)
            assert await clean_up(client, namespace, grown, [pool], timeout=90) == []
