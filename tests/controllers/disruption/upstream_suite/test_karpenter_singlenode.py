"""Karpenter's singlenodeconsolidation_test.go, ported: the order single-node
consolidation tries candidates in (savings ratio — price per unit of disruption cost —
descending, NodePools interleaved, NodePools a timed-out pass did not reach first) and
how a timeout records those NodePools. The order is observed through the
Unconsolidatable events of candidates that cannot consolidate (each is tried and
refused in turn). Each test names the ``It(...)`` it comes from."""

from __future__ import annotations

import dataclasses

from ksuite import LEAST_EXPENSIVE, Scene, SceneController, karpenter_scene, machine

from karpy.controllers.disruption._singlenode import SingleNodeConsolidation
from karpy.controllers.settings import Settings

POOLS = ("nodepool-1", "nodepool-2", "nodepool-3")
COST = "controller.kubernetes.io/pod-deletion-cost"


def three_pools(per_pool: int, costs: tuple[str, ...] = ()) -> Scene:
    """createCandidates: ``per_pool`` cheapest nodes in each of three NodePools, each with
    a pod too large to move (so every candidate is tried and refused); pod ``i`` of a
    pool gets deletion cost ``costs[i]`` if given."""
    scene = karpenter_scene(pool="nodepool-1")
    for pool in POOLS[1:]:
        scene.pool(pool, budgets=[{"nodes": "100%"}])
    for pool in POOLS:
        for i in range(per_pool):
            name = f"{pool}-{i}"
            machine(scene, name, LEAST_EXPENSIVE, pool=pool, cpu="32", memory="32Gi")
            annotations = {COST: costs[i]} if i < len(costs) else None
            scene.pod(f"pod-{name}", name, cpu="31", memory="10Mi", annotations=annotations)
    return scene


async def tried(scene: Scene, method: SingleNodeConsolidation,
                settings: Settings | None = None) -> list[str]:
    """The nodes ``method`` tried, in order."""
    controller = SceneController(scene, settings)
    assert await controller.run(method) == []
    return [e.name for e in controller.recorder.events
            if e.reason == "Unconsolidatable" and e.kind == "Node"]


async def test_should_sort_candidates_by_savings_ratio_descending() -> None:
    """singlenodeconsolidation_test.go Context("Candidate Shuffling") It("should sort
    candidates by savings ratio descending"): equal ratios, so the NodePools take turns."""
    order = await tried(three_pools(3), SingleNodeConsolidation())
    assert order == [f"{pool}-{i}" for i in range(3) for pool in POOLS]


async def test_should_sort_candidates_by_savings_ratio_with_different_disruption_costs() -> None:
    """singlenodeconsolidation_test.go It("should sort candidates by savings ratio with
    different disruption costs"): in each NodePool the cheapest-to-disrupt node first,
    so the three lowest-cost nodes lead, then the middle ones, then the costliest."""
    scene = three_pools(3, costs=("1000", "10", "0"))  # node 2 cheapest to disrupt
    order = await tried(scene, SingleNodeConsolidation())
    assert order == [f"{pool}-{i}" for i in (2, 1, 0) for pool in POOLS]


async def test_should_prioritize_nodepools_that_timed_out_in_previous_runs() -> None:
    """singlenodeconsolidation_test.go It("should prioritize nodepools that timed out in
    previous runs")"""
    method = SingleNodeConsolidation()
    method.unseen_pools = ["nodepool-2"]
    order = await tried(three_pools(3), method)
    assert order[0].startswith("nodepool-2-")


async def test_should_reset_timed_out_nodepools_when_all_nodepools_are_evaluated() -> None:
    """singlenodeconsolidation_test.go It("should reset timed out nodepools when all
    nodepools are evaluated")"""
    method = SingleNodeConsolidation()
    method.unseen_pools = ["nodepool-2"]
    await tried(three_pools(1), method)
    assert method.unseen_pools == []


async def test_should_mark_nodepools_as_timed_out_when_timeout_occurs() -> None:
    """singlenodeconsolidation_test.go It("should mark nodepools as timed out when
    timeout occurs"): a timeout already past before the first candidate."""
    method = SingleNodeConsolidation()
    settings = dataclasses.replace(Settings(), single_node_consolidation_timeout=-5.0)
    assert await tried(three_pools(10), method, settings) == []
    assert sorted(method.unseen_pools) == list(POOLS)
