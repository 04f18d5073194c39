"""The LP floor (karpy.scheduling.cost_floor) is at most the price of every plan the
simulator makes — first fit and improved — over random catalogues, NodePools and pods
(issue 14, acceptance 2: 200 inputs)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from scheduling_support import HOSTNAME, ZONE, ZONES, itype, nodepool, pod, term

from karpy.scheduling import NodePoolTemplate, Pod, SchedulerOptions, cost_floor
from karpy.scheduling.simulator import Simulator

CAPACITY = "karpenter.sh/capacity-type"


@st.composite
def inputs(draw: st.DrawFn) -> tuple[list[NodePoolTemplate], list[Pod], list[Pod]]:
    """NodePools over a random catalogue (prices not proportional to size, spot and
    on-demand, some zones missing), pods of mixed shapes and constraints, DaemonSets."""
    types = []
    for i in range(draw(st.integers(1, 8))):
        cpu = draw(st.sampled_from([1, 2, 4, 8, 16, 32]))
        memory = cpu * draw(st.sampled_from([1, 2, 4, 8]))
        types.append(itype(
            f"t{i}-{cpu}x{memory}", cpu, memory,
            pods=draw(st.sampled_from([4, 16, 110])),
            price=draw(st.floats(0.01, 10.0)),
            zones=draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=3, unique=True)),
            capacity_types=draw(st.sampled_from(
                [("on-demand",), ("spot",), ("spot", "on-demand")])),
        ))
    pools = []
    for p in range(draw(st.integers(1, 2))):
        wanted = draw(st.sampled_from([None, "spot", "on-demand"]))
        requirements = [] if wanted is None else [
            {"key": CAPACITY, "operator": "In", "values": [wanted]}]
        pools.append(nodepool(f"pool-{p}", types, weight=draw(st.integers(0, 10)),
                              requirements=requirements))
    cpu = st.sampled_from(["50m", "250m", "500m", "1", "1500m", "3"])
    memory = st.sampled_from(["64Mi", "512Mi", "1Gi", "3Gi", "6Gi"])
    kinds = st.sampled_from(["plain", "plain", "anti", "zone", "spot"])
    pods = []
    for i in range(draw(st.integers(1, 60))):
        kind = draw(kinds)
        spec: dict[str, Any] = {"cpu": draw(cpu), "memory": draw(memory)}
        if kind == "anti":
            spec["labels"] = {"app": "solo"}
            spec["anti_affinity"] = [term(HOSTNAME, {"app": "solo"})]
        elif kind == "zone":
            spec["node_selector"] = {ZONE: draw(st.sampled_from(ZONES))}
        elif kind == "spot":
            spec["node_selector"] = {CAPACITY: "spot"}
        pods.append(pod(f"{kind}-{i}", **spec))
    daemons = [pod(f"ds-{i}", cpu=draw(st.sampled_from(["50m", "100m"])), memory="64Mi")
               for i in range(draw(st.integers(0, 2)))]
    return pools, pods, daemons


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs())
def test_the_floor_is_at_most_every_plan(
    case: tuple[list[NodePoolTemplate], list[Pod], list[Pod]],
) -> None:
    pools, pods, daemons = case
    for options in (SchedulerOptions(improvement_budget=0), SchedulerOptions()):
        results = Simulator(pools, daemonsets=daemons, options=options).solve(pods)
        placed = [p for claim in results.new_nodeclaims for p in claim.pods]
        event("new capacity planned" if placed else "nothing to buy")
        if not placed:
            continue
        floor = cost_floor(placed, pools)
        assert floor.price <= results.price + 1e-6 * max(1.0, results.price), (
            f"floor {floor.price} above plan {results.price}")
        assert floor.forced_nodes <= len(results.new_nodeclaims)
