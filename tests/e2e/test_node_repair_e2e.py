"""End to end: node repair (the NodeRepair feature gate) against the local cluster,
with LEGACY_NODE_REPAIR=true: Karpenter v1.14's behaviour, kept by v1.15's legacy switch.

Issue 10, acceptance 6: a node whose Ready condition goes False for longer than the
kwok provider's repair toleration (shortened to 15 s here) is replaced — its NodeClaim is
deleted at once, the pod gets a new node and runs there; with more than 20 % of the
NodePool unhealthy nothing is repaired and the node says why (``NodeRepairBlocked``).

kwok plays the kubelet of nodes annotated ``kwok.x-k8s.io/node=fake`` and keeps them
Ready; to make a node fall ill the test takes the annotation away (kwok lets go of the
node, as a kubelet that died would) and writes ``Ready=False`` itself.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from harness import karpy_operator
from kube import (
    clean_up,
    connect,
    deployment,
    eventually,
    moved_pods,
    nodepool,
    pool_objects,
    ready_node_class,
    running_pods,
)

from karpy.controllers.settings import FeatureGates, Settings
from karpy.runtime import Client, errors, kinds
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NODE_CLASS = "repair-e2e"
SELECT = "karpy-e2e"
TOLERATION = 15
SETTINGS = Settings(batch_idle_duration=0.5, batch_max_duration=3.0, eviction_retry=1.0,
                    feature_gates=FeatureGates(node_repair=True), legacy_node_repair=True)
PROVIDER = {"repairToleration": f"{TOLERATION}s"}


def spread(app: dict[str, Any]) -> dict[str, Any]:
    """One pod per node (required anti-affinity on the hostname)."""
    app["spec"]["template"]["spec"]["affinity"] = {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": app["spec"]["selector"]["matchLabels"]},
            "topologyKey": "kubernetes.io/hostname",
        }]}}
    return app


async def make_not_ready(client: Client, name: str) -> datetime:
    """Take the node from kwok and mark it Ready=False; returns when."""
    await client.patch(kinds.NODE, name, {"metadata": {"annotations": {
        "kwok.x-k8s.io/node": None}}})
    node = await client.get(kinds.NODE, name)
    now = datetime.now(UTC).replace(microsecond=0)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = []
    for cond in (node.get("status") or {}).get("conditions") or ():
        cond = dict(cond)
        if cond["type"] == "Ready":
            cond.update(status="False", reason="KubeletNotReady", message="e2e: made ill",
                        lastTransitionTime=stamp, lastHeartbeatTime=stamp)
        conditions.append(cond)
    await client.patch_status(kinds.NODE, name, {"status": {"conditions": conditions}})
    return now


async def nodeclaim_of(client: Client, pool: str, node: str) -> dict[str, Any] | None:
    for claim in await pool_objects(client, NODE_CLAIM, [pool]):
        if (claim.get("status") or {}).get("nodeName") == node:
            return dict(claim)
    return None


async def test_a_node_not_ready_past_the_toleration_is_replaced(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    pool, app = "rp-one", "rp-one-web"
    async with connect(cluster) as client, karpy_operator(
            cluster, settings=SETTINGS, provider_settings=PROVIDER) as op:
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, nodepool(pool, node_class=NODE_CLASS,
                                                labels={SELECT: pool}))
        try:
            await client.create(kinds.DEPLOYMENT, deployment(
                app, node_selector={SELECT: pool}, replicas=1, cpu="500m"), namespace=namespace)
            [pod] = await eventually(lambda: running_pods(client, namespace, app, 1),
                                     timeout=90, what="the pod Running")
            sick = pod["spec"]["nodeName"]
            claim = await eventually(lambda: nodeclaim_of(client, pool, sick), timeout=30,
                                     what="the node's NodeClaim")
            claim_name = claim["metadata"]["name"]
            ill_since = await make_not_ready(client, sick)

            async def repaired() -> dict[str, Any] | None:
                try:
                    got = await client.get(NODE_CLAIM, claim_name)
                except errors.NotFound:
                    return {"gone": True}
                return dict(got) if got["metadata"].get("deletionTimestamp") else None

            await eventually(repaired, timeout=TOLERATION + 30,
                             what=f"NodeClaim {claim_name} to be deleted by node repair")
            noticed = datetime.now(UTC)
            assert (noticed - ill_since).total_seconds() >= TOLERATION - 1, (
                "repaired before the toleration ran out")
            lines = [r for r in op.messages("deleting unhealthy node")
                     if r.get("Node", {}).get("name") == sick]
            assert lines, "no 'deleting unhealthy node' log line"

            await eventually(lambda: moved_pods(client, namespace, app, sick), timeout=120,
                             what="the pod Running on a replacement node")
            text = op.operator.manager.metrics.render().decode() if op.operator else ""
            assert any(line.startswith("karpenter_nodeclaims_unhealthy_disrupted_total{")
                       and 'condition="ready"' in line and f'nodepool="{pool}"' in line
                       for line in text.splitlines())
        finally:
            forced = await clean_up(client, namespace, app, [pool], timeout=180)
        assert forced == [], f"termination left these behind: {forced}"


async def test_nothing_is_repaired_when_over_a_fifth_of_the_nodepool_is_unhealthy(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    pool, app = "rp-many", "rp-many-web"
    async with connect(cluster) as client, karpy_operator(
            cluster, settings=SETTINGS, provider_settings=PROVIDER):
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, nodepool(pool, node_class=NODE_CLASS,
                                                labels={SELECT: pool}))
        try:
            await client.create(kinds.DEPLOYMENT, spread(deployment(
                app, node_selector={SELECT: pool}, replicas=2, cpu="500m")),
                namespace=namespace)
            pods = await eventually(lambda: running_pods(client, namespace, app, 2),
                                    timeout=90, what="both pods Running")
            nodes = sorted({p["spec"]["nodeName"] for p in pods})
            assert len(nodes) == 2, f"expected one pod per node, got {nodes}"
            for node in nodes:
                await make_not_ready(client, node)  # 2 of 2 unhealthy: over 20 %

            async def blocked() -> list[Any]:
                return [e for e in await client.list(kinds.EVENT, namespace="default")
                        if e["reason"] == "NodeRepairBlocked"
                        and e["involvedObject"].get("name") in nodes]

            [event, *_] = await eventually(blocked, timeout=TOLERATION + 30,
                                           what="a NodeRepairBlocked event")
            assert event["type"] == "Warning"
            assert event["message"] == "more than 20% nodes are unhealthy in the nodepool"
            claims = await pool_objects(client, NODE_CLAIM, [pool])
            assert len(claims) == 2
            assert not [c for c in claims if c["metadata"].get("deletionTimestamp")], (
                "a NodeClaim was repaired although the NodePool was mostly unhealthy")
        finally:
            forced = await clean_up(client, namespace, app, [pool], timeout=180)
        assert forced == [], f"termination left these behind: {forced}"
