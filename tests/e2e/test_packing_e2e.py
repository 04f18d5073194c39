"""End to end: the scheduler's cost-improvement stage lowers the $/h of a real launch.

Issue 16, acceptance 3. The same mixed workload -- three pods that may not share a node
(hostname anti-affinity), six CPU-heavy pods and six memory-heavy pods -- is provisioned
twice on the local cluster by ``karpy run`` with the kwok provider: once with
``--cost-improvement-budget 0`` (first fit only) and once with the default budget. Both
times every pod must be Running on the NodeClaims karpy created; the NodeClaims' hourly
price (their instance type, zone and capacity type looked up in the kwok catalogue)
must be lower with the stage on.

The mix is chosen so that the stage matters on the kwok catalogue (checked with the
pure simulator in :func:`test_the_mix_is_one_the_stage_improves`, which needs no
cluster): first fit puts the CPU-heavy pods on a c-family node and the memory-heavy pods
on an r-family node; the improved plan pairs them on m-family nodes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from harness import karpy_process
from kube import (
    clean_up,
    connect,
    eventually,
    nodepool,
    pool_objects,
    ready_node_class,
)

from karpy.cloudprovider.kwok import generate_catalogue, to_instance_types
from karpy.runtime import Client, errors, kinds
from karpy.scheduling import NodePoolTemplate, Pod, Requirements, SchedulerOptions
from karpy.scheduling.simulator import Simulator
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

NODE_CLASS = "packing-e2e"
SELECT = "karpy-e2e-packing"  # the template label this file's pods select pools by
CLEANUP_TIMEOUT = 180.0
HOSTNAME = "kubernetes.io/hostname"
# NodePool requirements beyond amd64/linux: on-demand nodes of at most 8 vCPU, so that
# the workload needs several nodes and the family of each matters.
REQUIREMENTS: tuple[dict[str, Any], ...] = (
    {"key": "karpenter.kwok.sh/instance-cpu", "operator": "Lt", "values": ["9"]},
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
)
# (app, replicas, cpu, memory, hostname anti-affinity among its own pods)
MIX: tuple[tuple[str, int, str, str, bool], ...] = (
    ("solo", 3, "100m", "128Mi", True),
    ("cpu-heavy", 6, "1500m", "256Mi", False),
    ("memory-heavy", 6, "200m", "6Gi", False),
)


def workload(name: str, replicas: int, cpu: str, memory: str, anti: bool,
             select: str) -> dict[str, Any]:
    """A Deployment of pause pods labelled ``app: name`` with the given requests."""
    labels = {"app": name}
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0,
        "nodeSelector": {SELECT: select},
        "containers": [{
            "name": "pause",
            "image": "registry.k8s.io/pause:3.9",
            "resources": {"requests": {"cpu": cpu, "memory": memory}},
        }],
    }
    if anti:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": labels}, "topologyKey": HOSTNAME}]}}
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def kwok_prices() -> dict[tuple[str, str, str], float]:
    return {
        (it.name, o.zone, o.capacity_type): o.price
        for it in to_instance_types(generate_catalogue())
        for o in it.offerings
    }


def hourly_price(nodeclaims: Sequence[Mapping[str, Any]]) -> float:
    """What the launched NodeClaims cost per hour at the kwok catalogue's prices."""
    prices = kwok_prices()
    total = 0.0
    for nc in nodeclaims:
        labels = nc["metadata"]["labels"]
        total += prices[(labels["node.kubernetes.io/instance-type"],
                         labels["topology.kubernetes.io/zone"],
                         labels["karpenter.sh/capacity-type"])]
    return total


def simulated_prices() -> tuple[float, float]:
    """The $/h of the pure simulator's plan for MIX: first fit, and improved."""
    pods = []
    for app, replicas, cpu, memory, anti in MIX:
        spec = workload(app, replicas, cpu, memory, anti, "x")["spec"]["template"]
        for i in range(replicas):
            pods.append(Pod.from_dict({
                "metadata": {**spec["metadata"], "name": f"{app}-{i}", "namespace": "e2e"},
                "spec": {k: v for k, v in spec["spec"].items() if k != "nodeSelector"},
            }))
    requirements = Requirements.from_node_selector([
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
        *REQUIREMENTS,
    ])
    pool = NodePoolTemplate(name="p", requirements=requirements,
                            instance_types=to_instance_types(generate_catalogue()))
    first = Simulator([pool], options=SchedulerOptions(improvement_budget=0)).solve(pods)
    improved = Simulator([pool]).solve(pods)
    assert not first.errors and not improved.errors
    return first.price, improved.price


def test_the_mix_is_one_the_stage_improves() -> None:
    first, improved = simulated_prices()
    assert improved < first * 0.95, (first, improved)


async def _provision(
    cluster: Any, namespace: str, pool: str, *flags: str
) -> tuple[float, list[str]]:
    """Provision MIX on NodePool ``pool`` with ``karpy run *flags``, wait until every
    pod is Running on the pool's nodes; the NodeClaims' $/h and instance types.

    karpy starts once every pod of MIX is pending, so that both runs decide on the
    whole mix in one batch: pods trickling in over several batches (a loaded machine
    is slow to create them) would compare different decisions, not the stage."""
    wanted = sum(replicas for _, replicas, *_ in MIX)
    async with connect(cluster) as client:
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, nodepool(pool, node_class=NODE_CLASS,
                                                labels={SELECT: pool},
                                                requirements=REQUIREMENTS))
        try:
            for app, replicas, cpu, memory, anti in MIX:
                await client.create(kinds.DEPLOYMENT,
                                    workload(app, replicas, cpu, memory, anti, pool),
                                    namespace=namespace)

            async def all_unschedulable() -> bool:
                pods = await client.list(kinds.POD, namespace=namespace)
                waiting = [p for p in pods if any(
                    c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
                    for c in (p.get("status") or {}).get("conditions") or [])]
                return len(waiting) == wanted

            await eventually(all_unschedulable, timeout=120,
                             what=f"{wanted} pods waiting for capacity")
            async with karpy_process(cluster, *flags):
                try:
                    async def all_running() -> list[Any]:
                        pods = await client.list(kinds.POD, namespace=namespace)
                        up = [p for p in pods
                              if (p.get("status") or {}).get("phase") == "Running"]
                        return up if len(up) == wanted else []

                    pods = await eventually(
                        all_running, timeout=240,
                        what=f"{wanted} pods Running ({' '.join(flags) or 'default'})")
                    claims = await _launched(client, pool)
                    by_node = {(nc.get("status") or {}).get("nodeName"): nc for nc in claims}
                    for p in pods:  # every pod is on a node of one of this pool's NodeClaims
                        assert p["spec"].get("nodeName") in by_node, p["metadata"]["name"]
                    types = sorted(nc["metadata"]["labels"]["node.kubernetes.io/instance-type"]
                                   for nc in claims)
                    return hourly_price(claims), types
                finally:
                    # termination needs karpy running
                    for app, *_ in MIX[1:]:
                        with contextlib.suppress(errors.NotFound):
                            await client.delete(kinds.DEPLOYMENT, app, namespace=namespace,
                                                propagation_policy="Foreground")
                    forced = await clean_up(client, namespace, MIX[0][0], [pool],
                                            timeout=CLEANUP_TIMEOUT)
                    assert forced == [], f"termination left these behind: {forced}"
        finally:
            # karpy never started: nothing was launched, only the objects to take back
            for app, *_ in MIX:
                with contextlib.suppress(errors.NotFound):
                    await client.delete(kinds.DEPLOYMENT, app, namespace=namespace)
            with contextlib.suppress(errors.NotFound):
                await client.delete(NODE_POOL, pool)


async def _launched(client: Client, pool: str) -> list[Any]:
    """The pool's NodeClaims once every one of them has a node and launch labels."""
    async def ready() -> list[Any]:
        claims = await pool_objects(client, NODE_CLAIM, [pool])
        keys = ("node.kubernetes.io/instance-type", "topology.kubernetes.io/zone",
                "karpenter.sh/capacity-type")
        done = [nc for nc in claims
                if (nc.get("status") or {}).get("nodeName")
                and all(k in (nc["metadata"].get("labels") or {}) for k in keys)]
        return done if claims and len(done) == len(claims) else []

    return await eventually(ready, timeout=60, what=f"NodeClaims of {pool} launched")


@pytest.mark.cluster
@pytest.mark.slow
async def test_the_cost_improvement_stage_launches_a_cheaper_fleet(
    cluster: Any, namespace: str, kwok_crd: None
) -> None:
    off, off_types = await _provision(cluster, namespace, "packing-off",
                                      "--cost-improvement-budget", "0")
    on, on_types = await _provision(cluster, namespace, "packing-on")
    first, improved = simulated_prices()
    print(f"\nacceptance 3: stage off ${off:.4f}/h on {', '.join(off_types)}; "
          f"stage on ${on:.4f}/h on {', '.join(on_types)} "
          f"({1 - on / off:.1%} less; the pure simulator plans ${first:.4f} / ${improved:.4f})")
    assert on < off
