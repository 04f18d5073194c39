"""End to end: expiration and terminationGracePeriod against the local cluster (kwok).

Issue 10, acceptance 4: with a short ``expireAfter`` the node is deleted when it
expires, its pods go pending, the provisioner launches a replacement and the pods run
there. On the way the NodeClaim shows what nodeclaim.podevents and nodeclaim.disruption
write (``lastPodEventTime``, ``Consolidatable``).

Issue 10, acceptance 3 (the expiration half): a pod annotated
``karpenter.sh/do-not-disrupt`` and a pod whose PodDisruptionBudget allows no
disruption do not keep an expired node alive: once the NodeClaim's
terminationGracePeriod leaves them just their own grace period, they are deleted
(``Disrupted`` events) and the node goes.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta
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
    running_pods,
)

from karpy.controllers.settings import Settings
from karpy.runtime import Client, errors, kinds
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NODE_CLASS = "expiration-e2e"
SELECT = "karpy-e2e"
SETTINGS = Settings(batch_idle_duration=0.5, batch_max_duration=3.0, eviction_retry=1.0)


def when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def expiring_pool(name: str, *, expire_after: str, tgp: str | None = None) -> dict[str, Any]:
    pool = nodepool(name, node_class=NODE_CLASS, labels={SELECT: name})
    spec = pool["spec"]["template"]["spec"]
    spec["expireAfter"] = expire_after
    if tgp is not None:
        spec["terminationGracePeriod"] = tgp
    pool["spec"]["disruption"]["consolidateAfter"] = "2s"  # Consolidatable shows quickly
    return pool


async def claim_of_node(client: Client, pool: str, node_name: str) -> dict[str, Any] | None:
    for claim in await pool_objects(client, NODE_CLAIM, [pool]):
        if (claim.get("status") or {}).get("nodeName") == node_name:
            return dict(claim)
    return None


async def test_an_expired_node_is_replaced_and_its_pods_run_on_the_new_one(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    pool, app = "ex-expire", "ex-web"
    async with connect(cluster) as client, karpy_operator(cluster, settings=SETTINGS) as op:
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, expiring_pool(pool, expire_after="40s"))
        try:
            await client.create(kinds.DEPLOYMENT, deployment(
                app, node_selector={SELECT: pool}, replicas=2, cpu="500m"), namespace=namespace)
            first = await eventually(lambda: running_pods(client, namespace, app, 2),
                                     timeout=90, what="both pods Running")
            (old_node,) = {p["spec"]["nodeName"] for p in first}
            claim = await eventually(lambda: claim_of_node(client, pool, old_node),
                                     timeout=30, what="the node's NodeClaim")
            old_claim = claim["metadata"]["name"]

            async def marked() -> dict[str, Any] | None:
                got = await client.get(NODE_CLAIM, old_claim)
                status = got.get("status") or {}
                types = {c["type"]: c["status"] for c in status.get("conditions") or ()}
                ok = status.get("lastPodEventTime") and types.get("Consolidatable") == "True"
                return dict(got) if ok else None

            seen = await eventually(marked, timeout=30,
                                    what="lastPodEventTime and Consolidatable on the NodeClaim")
            created = when(seen["metadata"]["creationTimestamp"])

            async def replaced() -> list[Any]:
                if not await gone(client, NODE_CLAIM, old_claim):
                    return []
                pods = await running_pods(client, namespace, app, 2)
                return pods if all(p["spec"]["nodeName"] != old_node for p in pods) else []

            after = await eventually(replaced, timeout=120,
                                     what="the expired NodeClaim gone and both pods Running "
                                          "on a replacement")
            new_nodes = {p["spec"]["nodeName"] for p in after}
            for node_name in new_nodes:
                new_claim = await claim_of_node(client, pool, node_name)
                assert new_claim is not None
                assert when(new_claim["metadata"]["creationTimestamp"]) >= created + timedelta(
                    seconds=39), "the replacement was launched before the node expired"

            assert op.operator is not None
            text = op.operator.manager.metrics.render().decode()
            counted = [line for line in text.splitlines()
                       if line.startswith("karpenter_nodeclaims_disrupted_total{")
                       and f'nodepool="{pool}"' in line and 'reason="expired"' in line]
            assert counted, "the expiry is missing from karpenter_nodeclaims_disrupted_total"
        finally:
            forced = await clean_up(client, namespace, app, [pool], timeout=120)
        assert forced == [], f"termination left these behind: {forced}"


def blocked_pod(name: str, pool: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": name},
                     "annotations": {"karpenter.sh/do-not-disrupt": "true"}},
        "spec": {
            "terminationGracePeriodSeconds": 5,
            "nodeSelector": {SELECT: pool},
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                            "resources": {"requests": {"cpu": "250m"}}}],
        },
    }


def no_disruption_pdb(app: str) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": app},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": app}}},
    }


async def test_do_not_disrupt_and_a_blocking_pdb_give_way_once_the_grace_period_runs_out(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    pool, app, lone = "ex-tgp", "ex-tgp-web", "ex-tgp-lone"
    tgp, pod_grace = 20, 5
    async with connect(cluster) as client, karpy_operator(cluster, settings=SETTINGS):
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, expiring_pool(pool, expire_after="30s", tgp=f"{tgp}s"))
        try:
            await client.create(kinds.POD_DISRUPTION_BUDGET, no_disruption_pdb(app),
                                namespace=namespace)
            web = deployment(app, node_selector={SELECT: pool}, replicas=1, cpu="250m")
            web["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = pod_grace
            await client.create(kinds.DEPLOYMENT, web, namespace=namespace)
            await client.create(kinds.POD, blocked_pod(lone, pool), namespace=namespace)
            [web_pod] = await eventually(lambda: running_pods(client, namespace, app, 1),
                                         timeout=90, what="the PDB-covered pod Running")
            [lone_pod] = await eventually(lambda: running_pods(client, namespace, lone, 1),
                                          timeout=90, what="the do-not-disrupt pod Running")
            nodes = {web_pod["spec"]["nodeName"], lone_pod["spec"]["nodeName"]}
            claims = {}
            for node_name in nodes:
                claim = await eventually(lambda n=node_name: claim_of_node(client, pool, n),
                                         timeout=30, what=f"the NodeClaim of {node_name}")
                claims[node_name] = claim["metadata"]["name"]

            async def deleting(name: str) -> datetime | None:
                try:
                    got = await client.get(NODE_CLAIM, name)
                except errors.NotFound:
                    return None
                stamp = got["metadata"].get("deletionTimestamp")
                return when(stamp) if stamp else None

            for node_name, claim_name in claims.items():
                deleted_at = await eventually(lambda c=claim_name: deleting(c), timeout=60,
                                              what=f"{claim_name} to expire")
                deadline = deleted_at + timedelta(seconds=tgp)

                # The termination controller stamps the deadline once it sees the
                # deletion, a moment after the deletionTimestamp is set.
                async def stamped(c: str = claim_name) -> str | None:
                    got = await client.get(NODE_CLAIM, c)
                    return (got["metadata"].get("annotations") or {}).get(
                        "karpenter.sh/nodeclaim-termination-timestamp")

                annotation = await eventually(stamped, timeout=30,
                                              what=f"{claim_name}'s termination deadline")
                assert when(annotation) == deadline
                await eventually(lambda n=node_name: gone(client, kinds.NODE, n),
                                 timeout=tgp + 60, what=f"node {node_name} to terminate")
                # Not before the blocked pods were due to be forced out.
                assert datetime.now(deadline.tzinfo) >= deadline - timedelta(
                    seconds=pod_grace + 1)

            events = await client.list(kinds.EVENT, namespace=namespace)
            disrupted = {e["involvedObject"]["name"] for e in events
                         if e["reason"] == "Disrupted"}
            assert lone in disrupted, "the do-not-disrupt pod was not force-deleted"
            assert web_pod["metadata"]["name"] in disrupted, (
                "the PDB-covered pod was not force-deleted")
            refused = [e for e in events if e["reason"] == "Evicted"
                       and e["involvedObject"]["name"] in (lone, web_pod["metadata"]["name"])]
            assert refused == [], "a blocked pod was evicted instead of waiting"
            await eventually(lambda: running_pods(client, namespace, app, 1), timeout=90,
                             what="the PDB-covered pod Running again on a replacement")
        finally:
            with contextlib.suppress(errors.NotFound):
                await client.delete(kinds.POD_DISRUPTION_BUDGET, app, namespace=namespace)
            with contextlib.suppress(errors.NotFound):
                await client.delete(kinds.POD, lone, namespace=namespace)
            forced = await clean_up(client, namespace, app, [pool], timeout=120)
        assert forced == [], f"termination left these behind: {forced}"
