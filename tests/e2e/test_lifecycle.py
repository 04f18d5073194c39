"""End to end: the NodeClaim lifecycle against the local cluster with the kwok provider.

Issue 7, acceptance 4 and 5:

4. Insufficient capacity injected on the cheapest offering: the NodeClaim pinned to it is
   deleted, the offering is marked unavailable, and the pods still end Running on a node
   of another offering.
5. A launch whose Node never registers: its NodeClaim is deleted once the registration
   timeout (shortened through ``Settings.registration_ttl``) passes, and a new NodeClaim
   takes its place.

Each test runs karpy in-process (tests/e2e/harness.py), uses its own KWOKNodeClass,
NodePools (selected by a template label only its pods ask for) and namespace, and
deletes its NodeClaims, Nodes and NodePools before karpy stops.
"""

from __future__ import annotations

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
    running_pods,
)

from karpy.cloudprovider.kwok import generate_catalogue
from karpy.cloudprovider.kwok._catalogue import to_instance_types
from karpy.controllers.settings import Settings
from karpy.runtime import kinds
from karpy.scheduling import resources as res
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NODE_CLASS = "lifecycle-e2e"
SELECT = "karpy-e2e"  # the template label a test's pods select their NodePools by
POD_CPU = "500m"
CLEANUP_TIMEOUT = 90.0


# -- helpers ---------------------------------------------------------------------------


def pool_manifest(
    name: str, select: str, *, weight: int, requirements: list[dict[str, Any]]
) -> dict[str, Any]:
    return nodepool(name, node_class=NODE_CLASS, labels={SELECT: select}, weight=weight,
                    requirements=requirements)


def app_manifest(name: str, select: str, replicas: int) -> dict[str, Any]:
    return deployment(name, node_selector={SELECT: select}, replicas=replicas, cpu=POD_CPU)


def condition(obj: Any, type_: str) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return str(c["status"])
    return None


def cheapest_offering() -> tuple[str, str, str]:
    """The cheapest kwok offering (instance type, zone, capacity type) for one pod."""
    need = res.parse_resource_list({"cpu": POD_CPU})
    best: tuple[float, str, str, str] | None = None
    for it in to_instance_types(generate_catalogue()):
        if it.requirements.labels().get("kubernetes.io/arch") != "amd64":
            continue
        if it.requirements.labels().get("kubernetes.io/os") != "linux":
            continue
        if not res.fits(need, it.allocatable):
            continue
        for o in it.offerings:
            rank = (o.price, it.name, o.zone, o.capacity_type)
            if best is None or rank < best:
                best = rank
    assert best is not None
    return best[1], best[2], best[3]


def parse_time(text: str) -> datetime:
    """An RFC 3339 time as the API server and karpy's log lines write it."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def nodeclaim_of(record: dict[str, Any]) -> str:
    return str((record.get("NodeClaim") or {}).get("name", ""))


# -- acceptance 4 ----------------------------------------------------------------------


async def test_insufficient_capacity_on_the_cheapest_offering(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    instance_type, zone, capacity_type = cheapest_offering()
    pinned, fallback, app = "lc-ice-pinned", "lc-ice-open", "lc-ice"
    pools = [pinned, fallback]
    settings = Settings(batch_idle_duration=0.5, batch_max_duration=3.0)
    faults = {"insufficientCapacity": f"{instance_type}/{zone}/{capacity_type}"}
    async with connect(cluster) as client, karpy_operator(
        cluster, settings=settings, provider_settings=faults
    ) as op:
        await ready_node_class(client, NODE_CLASS)
        # The heavier pool offers only the cheapest offering, so its NodeClaim has nowhere
        # else to go when that offering has no capacity; the other pool offers the rest.
        await client.create(NODE_POOL, pool_manifest(pinned, app, weight=100, requirements=[
            {"key": "node.kubernetes.io/instance-type", "operator": "In",
             "values": [instance_type]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]},
        ]))
        await client.create(NODE_POOL, pool_manifest(fallback, app, weight=1, requirements=[]))
        forced: list[str] = []
        try:
            await client.create(kinds.DEPLOYMENT, app_manifest(app, app, 2), namespace=namespace)

            failed, *_ = await op.wait_for_log(
                "failed launching nodeclaim",
                where=lambda r: nodeclaim_of(r).startswith(pinned + "-"), timeout=90,
            )
            victim = nodeclaim_of(failed)
            assert "insufficient capacity" in failed["error"]
            await eventually(lambda: gone(client, NODE_CLAIM, victim), timeout=60,
                             what=f"NodeClaim {victim} to be deleted")
            event_reasons = [
                e["reason"] for e in await client.list(kinds.EVENT, namespace="default")
                if e["involvedObject"].get("name") == victim
            ]
            assert "InsufficientCapacityError" in event_reasons

            pods = await eventually(lambda: running_pods(client, namespace, app, 2),
                                    timeout=120, what="both pods Running")
            for pod in pods:
                node = await client.get(kinds.NODE, pod["spec"]["nodeName"])
                labels = node["metadata"]["labels"]
                offering = (labels["node.kubernetes.io/instance-type"],
                            labels["topology.kubernetes.io/zone"],
                            labels["karpenter.sh/capacity-type"])
                assert offering != (instance_type, zone, capacity_type)
                assert labels["karpenter.sh/nodepool"] == fallback
            launched = [nodeclaim_of(r) for r in op.messages("launched nodeclaim")]
            assert any(name.startswith(fallback + "-") for name in launched)
            assert not any(name.startswith(pinned + "-") for name in launched)
        finally:
            forced = await clean_up(client, namespace, app, pools,
                                    timeout=CLEANUP_TIMEOUT)
        assert forced == [], f"termination left these behind: {forced}"


# -- acceptance 5 ----------------------------------------------------------------------


async def test_a_node_that_never_registers_is_replaced(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    pool, app = "lc-unregistered", "lc-unregistered"
    ttl = 20.0
    settings = Settings(batch_idle_duration=0.5, batch_max_duration=3.0, registration_ttl=ttl)
    async with connect(cluster) as client, karpy_operator(
        cluster, settings=settings, provider_settings={"unregisteredLaunches": "1"}
    ) as op:
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, pool_manifest(pool, app, weight=1, requirements=[]))
        forced: list[str] = []
        try:
            await client.create(kinds.DEPLOYMENT, app_manifest(app, app, 1), namespace=namespace)

            first, *_ = await op.wait_for_log(
                "launched nodeclaim", where=lambda r: nodeclaim_of(r).startswith(pool + "-"),
                timeout=90,
            )
            lost = nodeclaim_of(first)
            created = parse_time((await client.get(NODE_CLAIM, lost))["metadata"][
                "creationTimestamp"])
            [timed_out] = await op.wait_for_log(
                "terminating due to timeout", where=lambda r: nodeclaim_of(r) == lost,
                timeout=ttl + 60,
            )
            assert timed_out["reason"] == "registration_timeout"
            assert timed_out["timeout"] == "20s"
            # not before the timeout, counted from the NodeClaim's creation
            assert (parse_time(timed_out["time"]) - created).total_seconds() >= ttl
            assert not [r for r in op.messages("registered nodeclaim") if nodeclaim_of(r) == lost]
            await eventually(lambda: gone(client, NODE_CLAIM, lost), timeout=60,
                             what=f"NodeClaim {lost} to be deleted")

            [pod] = await eventually(lambda: running_pods(client, namespace, app, 1),
                                     timeout=120, what="the pod Running")
            node = await client.get(kinds.NODE, pod["spec"]["nodeName"])
            [replacement] = [
                nc for nc in await pool_objects(client, NODE_CLAIM, [pool])
                if (nc.get("status") or {}).get("providerID") == node["spec"]["providerID"]
            ]
            assert replacement["metadata"]["name"] != lost
            assert condition(replacement, "Ready") == "True"
            registered = [nodeclaim_of(r) for r in op.messages("registered nodeclaim")]
            assert replacement["metadata"]["name"] in registered
        finally:
            forced = await clean_up(client, namespace, app, [pool],
                                    timeout=CLEANUP_TIMEOUT)
        assert forced == [], f"termination left these behind: {forced}"
