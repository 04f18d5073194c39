"""End to end: termination and NodePool bookkeeping against the local cluster with the
kwok provider.

Issue 7, acceptance 6: ``kubectl delete node X`` on a node karpy provisioned — its pods
are evicted through the Eviction API, a PodDisruptionBudget with minAvailable holds the
last one back until a replacement is Running elsewhere, the finalizer is removed and the
instance deleted (kwok: the Node object and its NodeClaim are gone). Along the way the
NodePool's status.resources and status.nodes follow its nodes.

The test runs karpy in-process (tests/e2e/harness.py), uses its own KWOKNodeClass,
NodePool (selected by a template label only its pods ask for) and namespace, and deletes
its NodeClaims, Nodes and NodePool before karpy stops.
"""

from __future__ import annotations

import contextlib
import re
from datetime import datetime
from typing import Any

import pytest
from harness import karpy_operator
from kube import (
    clean_up,
    connect,
    deployment,
    eventually,
    gone,
    nodepool,
    pool_objects,
    ready_node_class,
)

from karpy.controllers.settings import Settings
from karpy.runtime import Client, errors, kinds
from karpy.scheduling import resources as res
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NODE_CLASS = "termination-e2e"
SELECT = "karpy-e2e"
POOL = "tm-drain"
APP = "tm-web"
POD_CPU = "500m"


def pdb(min_available: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": APP},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": APP}}},
    }


def ready_since(pod: Any) -> datetime | None:
    """When the pod became Ready (None while it is not)."""
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c["type"] == "Ready" and c["status"] == "True":
            return datetime.fromisoformat(c["lastTransitionTime"].replace("Z", "+00:00"))
    return None


async def app_pods(client: Client, namespace: str) -> list[Any]:
    return await client.list(kinds.POD, namespace=namespace, label_selector={"app": APP})


async def ready_pods(client: Client, namespace: str, count: int) -> list[Any]:
    pods = [p for p in await app_pods(client, namespace)
            if ready_since(p) and not p["metadata"].get("deletionTimestamp")]
    return pods if len(pods) == count else []


async def events_about(client: Client, namespace: str, name: str) -> list[Any]:
    return [e for e in await client.list(kinds.EVENT, namespace=namespace)
            if e["involvedObject"].get("name") == name]


def event_time(event: Any) -> datetime:
    stamp = event.get("lastTimestamp") or event.get("eventTime") or event["firstTimestamp"]
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))


async def status_matches_nodes(client: Client) -> dict[str, Any] | None:
    """The NodePool's status once it equals the sum over its registered nodes."""
    nodes = await pool_objects(client, kinds.NODE, [POOL])
    claims = await pool_objects(client, NODE_CLAIM, [POOL])
    if not nodes or len(nodes) != len(claims):
        return None
    cpu = sum(res.to_canonical("cpu", n["status"]["capacity"]["cpu"]) for n in nodes)
    pool = await client.get(NODE_POOL, POOL)
    status = pool.get("status") or {}
    resources = status.get("resources") or {}
    if status.get("nodes") != len(nodes) or "cpu" not in resources:
        return None
    if res.to_canonical("cpu", resources["cpu"]) != cpu or resources.get("nodes") != str(
            len(nodes)):
        return None
    return dict(status)


async def clean_up_with_pdb(client: Client, namespace: str) -> list[str]:
    """Delete the PDB, then the workload, NodePool and NodeClaims (see kube.clean_up)."""
    with contextlib.suppress(errors.NotFound):
        await client.delete(kinds.POD_DISRUPTION_BUDGET, APP, namespace=namespace)
    return await clean_up(client, namespace, APP, [POOL], timeout=120)


async def test_deleting_a_node_drains_it_within_its_pdb_and_gives_it_back(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    settings = Settings(batch_idle_duration=0.5, batch_max_duration=3.0, eviction_retry=1.0)
    async with connect(cluster) as client, karpy_operator(cluster, settings=settings) as op:
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, nodepool(POOL, node_class=NODE_CLASS,
                                                labels={SELECT: POOL}))
        forced: list[str] = []
        try:
            await client.create(kinds.DEPLOYMENT, deployment(
                APP, node_selector={SELECT: POOL}, replicas=2, cpu=POD_CPU), namespace=namespace)
            first = await eventually(lambda: ready_pods(client, namespace, 2), timeout=120,
                                     what="both pods Running")
            hosts = {p["spec"]["nodeName"] for p in first}
            assert len(hosts) == 1, f"both pods were expected on one new node, got {hosts}"
            (victim,) = hosts
            node = await client.get(kinds.NODE, victim)
            assert "karpenter.sh/termination" in node["metadata"]["finalizers"]
            [claim] = [nc for nc in await pool_objects(client, NODE_CLAIM, [POOL])
                       if (nc.get("status") or {}).get("providerID") == node["spec"]["providerID"]]
            claim_name = claim["metadata"]["name"]

            # The NodePool's status counts the node.
            status = await eventually(lambda: status_matches_nodes(client), timeout=60,
                                      what="NodePool status to count its node")
            assert status["nodes"] == 1

            await client.create(kinds.POD_DISRUPTION_BUDGET, pdb(1), namespace=namespace)

            async def pdb_counted() -> bool:
                got = await client.get(kinds.POD_DISRUPTION_BUDGET, APP, namespace=namespace)
                return (got.get("status") or {}).get("currentHealthy") == 2

            await eventually(pdb_counted, timeout=60, what="the PDB to see both pods")

            cluster.kubectl("delete", "node", victim, "--wait=false")

            # A replacement node comes up for the first evicted pod; only once a
            # replacement is Running may the second pod leave.
            await eventually(lambda: gone(client, kinds.NODE, victim), timeout=180,
                             what=f"node {victim} to be terminated")
            await eventually(lambda: gone(client, NODE_CLAIM, claim_name), timeout=60,
                             what=f"NodeClaim {claim_name} to be terminated")
            after = await eventually(lambda: ready_pods(client, namespace, 2), timeout=120,
                                     what="two replacement pods Running")
            assert all(p["spec"]["nodeName"] != victim for p in after)

            node_events = await events_about(client, "default", victim)
            # One FailedDraining per node per 2 minutes, as Karpenter dedupes it: the
            # first reason stands (pods waiting, or the PDB's refusal); the refusals
            # themselves are counted in eviction_requests{code="429"} below.
            draining = [e["message"] for e in node_events if e["reason"] == "FailedDraining"]
            assert draining, "no FailedDraining event while the PDB held the drain back"
            assert all(re.fullmatch(r"Failed to drain node, (evicting pod violates a PDB"
                                    r"|\d+ pods are waiting to be evicted)", m)
                       for m in draining), draining
            evicted = []
            for pod in first:
                [event] = [e for e in await events_about(client, namespace,
                                                         pod["metadata"]["name"])
                           if e["reason"] == "Evicted"]
                evicted.append((event_time(event), pod["metadata"]["name"]))
            evicted.sort()
            last_evicted_at = evicted[-1][0]
            # The last pod left only after a replacement (a pod not on the victim) was Ready.
            replacement_ready = min(
                t for p in after if (t := ready_since(p)) is not None
            )
            assert replacement_ready <= last_evicted_at

            # Karpenter's log lines, with their fields.
            tainted = [r for r in op.messages("tainted node")
                       if r.get("Node", {}).get("name") == victim]
            assert tainted and tainted[0]["taint.Key"] == "karpenter.sh/disrupted"
            assert tainted[0]["taint.Effect"] == "NoSchedule"
            assert [r for r in op.messages("deleted node")
                    if r.get("Node", {}).get("name") == victim]
            assert [r for r in op.messages("deleted nodeclaim")
                    if r.get("NodeClaim", {}).get("name") == claim_name]

            # The NodePool's status follows: the victim no longer counts.
            await eventually(lambda: status_matches_nodes(client), timeout=60,
                             what="NodePool status to count the replacement nodes")

            # ...and so do Karpenter's metrics on /metrics.
            assert op.operator is not None
            manager = op.operator.manager

            async def exported() -> str | None:
                text = manager.metrics.render().decode()
                usage = f'karpenter_nodepools_usage{{nodepool="{POOL}",resource_type="nodes"}}'
                return text if usage in text else None

            text = await eventually(exported, timeout=30, what="karpenter_nodepools_usage")
            for line in (
                f'karpenter_nodes_terminated_total{{nodepool="{POOL}",zone=',
                'karpenter_nodeclaims_terminated_total{capacity_type=',
                f'karpenter_nodes_drained_total{{nodepool="{POOL}"}} 1.0',
                'karpenter_pods_drained_total{reason="Forceful Termination"}',
                'karpenter_pods_eviction_requests_total{code="429"}',
                "karpenter_cluster_state_node_count ",
                'karpenter_nodes_allocatable{arch="amd64",capacity_type=',
            ):
                assert line in text, f"{line!r} missing from /metrics"
        finally:
            forced = await clean_up_with_pdb(client, namespace)
        assert forced == [], f"termination left these behind: {forced}"
