"""consolidation_test.go Context("Budgets")'s "should not mark ... consolidated" cases,
ported. Karpenter remembers that a method found nothing to do (``IsConsolidated``) and
skips it until the cluster changes; these cases check that a budget blocking every
candidate does not count as "nothing to do". karpy keeps no such memo — every pass
evaluates afresh — so the port checks what the memo protects: with the candidates
blocked by a 0 % budget there is no command, and once the budget opens, with nothing
else changed, the same method disrupts them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from ksuite import MOST_EXPENSIVE, Scene, SceneController, karpenter_scene, machine

from karpy.controllers.disruption._emptiness import Emptiness
from karpy.controllers.disruption._method import Method
from karpy.controllers.disruption._multinode import MultiNodeConsolidation
from karpy.controllers.disruption._singlenode import SingleNodeConsolidation
from karpy.controllers.settings import FeatureGates, Settings
from karpy.runtime import freeze

SPOT_TO_SPOT = Settings(feature_gates=FeatureGates(spot_to_spot_consolidation=True))


def nodes(pools: int, *, with_pods: bool) -> Scene:
    """``pools`` NodePools with a 0 % budget, three most-expensive nodes each (one small
    pod on each node if ``with_pods``)."""
    scene = karpenter_scene(budgets=[{"nodes": "0%"}])
    for p in range(pools):
        pool = "default" if p == 0 else f"pool-{p}"
        if p:
            scene.pool(pool, budgets=[{"nodes": "0%"}])
        for i in range(3):
            machine(scene, f"{pool}-{i}", MOST_EXPENSIVE, pool=pool, cpu="32", memory="32Gi")
            if with_pods:
                scene.pod(f"{pool}-pod-{i}", f"{pool}-{i}", cpu="10m", memory="10Mi")
    return scene


def open_budgets(scene: Scene) -> None:
    for pool in scene.pools.values():
        pool["spec"]["disruption"]["budgets"] = [{"nodes": "100%"}]
        scene.cluster.update_nodepool(freeze(pool))


METHODS = pytest.mark.parametrize(("method", "with_pods"), [
    (Emptiness, False), (MultiNodeConsolidation, True), (SingleNodeConsolidation, True),
], ids=["empty", "multi", "single"])


@METHODS
@pytest.mark.parametrize("pools", [1, 10], ids=["one-nodepool", "many-nodepools"])
async def test_should_not_mark_consolidated_if_candidates_cannot_be_disrupted_due_to_budgets(
    method: Callable[[], Method], with_pods: bool, pools: int,
) -> None:
    """consolidation_test.go Context("Budgets") It("should not mark empty node
    consolidated if the candidates can't be disrupted due to budgets with one
    nodepool") / It("should not mark empty node consolidated if all candidates can't be
    disrupted due to budgets with many nodepools") / the same two for "multi node" and
    "single node"."""
    scene = nodes(pools, with_pods=with_pods)
    controller = SceneController(scene, SPOT_TO_SPOT)
    assert await controller.run(method()) == []
    open_budgets(scene)
    assert await controller.run(method()) != []
