"""Limits across NodePools (issue 41, item 2; kubernetes-sigs/karpenter#745, #1747,
aws/karpenter-provider-aws#2474): a ClusterLimit caps what the NodePools it selects
launch together, as a NodePool's spec.limits caps one pool.

Two NodePools carry the label the ClusterLimit selects; the heavier one has a limit of
its own (4 CPU), the other none, and the ClusterLimit allows 8 CPU between them. A
workload asks for 10 CPU. Karpenter, or karpy before ClusterLimits, would fill the
heavy pool to its limit and put the rest on the other pool (10 CPU or more). With the
ClusterLimit, the NodeClaims of both pools stay within 8 CPU, the pods that do not fit
stay Pending with karpy's FailedScheduling event naming the ClusterLimit, ``karpy
explain pod`` names it with its usage, the ClusterLimit's status lists both pools and
what they use, and karpy_clusterlimits_usage says the same. Raising the limit lets the
rest be provisioned: the limit, and nothing else, held them.
"""

from __future__ import annotations

from typing import Any

import pytest
from harness import RunningKarpy, karpy_operator
from kube import clean_up, connect, deployment, eventually, nodepool, pool_objects, ready_node_class
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from karpy.controllers.settings import Settings
from karpy.runtime import Client, KubeClient, kinds
from karpy.scheduling import resources as res
from karpy.state import NODE_CLAIM, NODE_POOL
from karpy.state.kinds import CLUSTER_LIMIT
from karpy.tools.explain import explain_pod_in
from karpy.tools.view import LiveCluster, open_view

pytestmark = [pytest.mark.cluster]

NODE_CLASS = "clusterlimit-e2e"
SELECT = "karpy-e2e-clusterlimit"
GROUP_LABEL = "e2e.karpy.dev/limit-group"
LIMIT = "cl-e2e"
HEAVY, OTHER, APP = "cl-heavy", "cl-other", "cl-app"
PODS, POD_CPU = 20, "500m"


def claim_cpu(claims: list[Any]) -> int:
    """The CPU the NodeClaims hold (their capacity once launched), in millicores."""
    return sum(res.to_canonical(res.CPU, (c.get("status") or {}).get("capacity", {})
                                  .get("cpu", "0")) for c in claims)


def usage_metric(op: RunningKarpy) -> float | None:
    assert op.operator is not None
    text = generate_latest(op.operator.manager.metrics.registry).decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (sample.name == "karpy_clusterlimits_usage"
                    and sample.labels == {"clusterlimit": LIMIT, "resource_type": "cpu"}):
                return float(sample.value)
    return None


async def pending_pods(client: Client, namespace: str) -> list[Any]:
    return [p for p in await client.list(kinds.POD, namespace=namespace,
                                         label_selector={"app": APP})
            if not p["spec"].get("nodeName")]


async def launched(client: KubeClient) -> list[Any] | None:
    """The pools' NodeClaims once every one of them has launched (has a capacity)."""
    claims = await pool_objects(client, NODE_CLAIM, [HEAVY, OTHER])
    if not claims or not all((c.get("status") or {}).get("capacity") for c in claims):
        return None
    return claims


async def test_a_clusterlimit_caps_the_nodepools_it_selects_together(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    settings = Settings(batch_idle_duration=0.5, batch_max_duration=3.0)
    async with connect(cluster) as client, karpy_operator(cluster, settings=settings) as op:
        await ready_node_class(client, NODE_CLASS)
        await client.create(CLUSTER_LIMIT, {
            "apiVersion": "karpy.dev/v1alpha1", "kind": "ClusterLimit",
            "metadata": {"name": LIMIT},
            "spec": {"nodePoolSelector": {"matchLabels": {GROUP_LABEL: "team"}},
                     "limits": {"cpu": "8"}},
        })
        for name, weight, limits in ((HEAVY, 100, {"cpu": "4"}), (OTHER, 10, None)):
            pool = nodepool(name, node_class=NODE_CLASS, labels={SELECT: APP}, weight=weight,
                            limits=limits)
            pool["metadata"]["labels"] = {GROUP_LABEL: "team"}
            await client.create(NODE_POOL, pool)
        try:
            await client.create(kinds.DEPLOYMENT, deployment(
                APP, node_selector={SELECT: APP}, replicas=PODS, cpu=POD_CPU),
                namespace=namespace)

            # karpy says, on a pod it cannot place, that the ClusterLimit holds it.
            async def held_by_the_limit() -> list[Any]:
                events = await client.list(kinds.EVENT, namespace=namespace)
                return [e for e in events if e.get("reason") == "FailedScheduling"
                        and f"ClusterLimit {LIMIT}" in str(e.get("message"))]

            events = await eventually(held_by_the_limit, timeout=90,
                                      what=f"a FailedScheduling event naming ClusterLimit {LIMIT}")
            claims = await eventually(lambda: launched(client), timeout=60,
                                      what="the NodeClaims launched")
            used = claim_cpu(claims)
            pools = {c["metadata"]["labels"]["karpenter.sh/nodepool"] for c in claims}
            print(f"\nclusterlimit: {len(claims)} NodeClaims of {sorted(pools)} hold "
                  f"{used / 1000:g} CPU under a ClusterLimit of 8 (the heavy pool's own "
                  f"limit 4); event: {events[0]['message']}")
            assert used <= 8000, f"the NodeClaims hold {used}m CPU, past the ClusterLimit of 8"
            assert pools == {HEAVY, OTHER}, f"both pools provision under the limit: {pools}"
            heavy_cpu = claim_cpu([c for c in claims
                                   if c["metadata"]["labels"]["karpenter.sh/nodepool"] == HEAVY])
            assert heavy_cpu <= 4000, f"the heavy pool's own limit broke: {heavy_cpu}m"
            pending = await pending_pods(client, namespace)
            assert pending, "every pod was placed: the ClusterLimit held nothing"

            # The ClusterLimit's status: the pools it selects and what they use.
            async def status() -> dict[str, Any] | None:
                obj = await client.get(CLUSTER_LIMIT, LIMIT)
                st = obj.get("status") or {}
                if st.get("nodePools") != sorted([HEAVY, OTHER]):
                    return None
                if res.to_canonical(res.CPU, st.get("resources", {}).get("cpu", "0")) != used:
                    return None
                return dict(st)

            st = await eventually(status, timeout=30, what="the ClusterLimit's status")
            assert int(st["resources"]["nodes"]) == len(claims)
            ready = {c["type"]: c["status"] for c in st["conditions"]}
            assert ready["Ready"] == "True"
            assert ready["LimitReached"] == ("True" if used == 8000 else "False")

            async def metric() -> float | None:
                value = usage_metric(op)
                return value if value == used / 1000 else None

            assert await eventually(metric, timeout=30,
                                    what="karpy_clusterlimits_usage") == used / 1000

            # karpy explain names the ClusterLimit, its limit and what the pools use, for
            # a pod still pending once kube-scheduler has filled the new nodes.
            async def explained_held() -> Any:
                held = await pending_pods(client, namespace)
                if not held:
                    return None
                async with open_view(LiveCluster(kubeconfig=cluster.kubeconfig)) as view:
                    out = await explain_pod_in(
                        view, f"{namespace}/{held[0]['metadata']['name']}")
                return out if out.status == "pending" else None

            explained = await eventually(explained_held, timeout=60,
                                         what="karpy explain of a pod the limit holds")
            limit_reasons = [r for v in explained.nodepools for r in v.reasons
                             if r.details.get("clusterlimit") == LIMIT]
            assert limit_reasons, explained.to_dict()
            assert f"clusterlimit {LIMIT}" in limit_reasons[0].message
            assert not any(v.fits for v in explained.nodepools if v.nodepool in (HEAVY, OTHER))
            print(f"explain: {limit_reasons[0].message}")

            # Raise the limit: the pods it held are provisioned (on the unlimited pool).
            await client.patch(CLUSTER_LIMIT, LIMIT, {"spec": {"limits": {"cpu": "100"}}})

            async def all_placed() -> bool:
                return not await pending_pods(client, namespace)

            await eventually(all_placed, timeout=120, what="every pod placed once raised")
            assert claim_cpu(await eventually(lambda: launched(client), timeout=60,
                                              what="the new NodeClaims launched")) > 8000
        finally:
            await client.delete(CLUSTER_LIMIT, LIMIT)
            assert await clean_up(client, namespace, APP, [HEAVY, OTHER], timeout=90) == []
