"""A cost-checked drift (``karpy.dev/drift-cost-checked``, set by a provider that drifts
a node early, as karpy-aws on a spot rebalance recommendation): replaced only when the
replacements cost no more per hour than the node; blocked, saying both prices, when
they would cost more. Without the annotation drift replaces whatever the price, as
Karpenter's does."""

from __future__ import annotations

import pytest
from disruption_support import Scene, SceneController, catalogue

from karpy.apis.annotations import ANNOTATION_DRIFT_COST_CHECKED
from karpy.controllers.disruption._drift import Drift
from karpy.runtime import freeze, thaw


def scene_with(node_type: str, capacity_type: str, *, checked: bool,
               pool_capacity: str) -> Scene:
    scene = Scene(types=catalogue(spot=True))
    scene.pool(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In",
                              "values": [pool_capacity]}])
    scene.machine("old", node_type, drifted=True, capacity_type=capacity_type)
    scene.pod("web", "old", cpu="1")
    if checked:
        state = scene.cluster.node_by_name("old")
        assert state is not None and state.nodeclaim is not None
        claim = thaw(state.nodeclaim)
        claim["metadata"].setdefault("annotations", {})[ANNOTATION_DRIFT_COST_CHECKED] = "true"
        scene.cluster.update_nodeclaim(freeze(claim))
    return scene


async def test_a_cost_checked_drift_replaces_when_the_replacement_is_not_dearer() -> None:
    # a spot m-8x ($0.12/h) for one 1-CPU pod: a spot m-2x ($0.03/h) replaces it
    scene = scene_with("m-8x", "spot", checked=True, pool_capacity="spot")
    [command] = await SceneController(scene).run(Drift())
    [replacement] = command.replacements
    assert replacement.price <= 0.12


@pytest.mark.parametrize("checked", [True, False])
async def test_a_dearer_replacement_is_refused_only_when_cost_checked(checked: bool) -> None:
    # a spot m-2x ($0.03/h) where the pool now allows on-demand only: an m-1x, $0.05/h
    scene = scene_with("m-2x", "spot", checked=checked, pool_capacity="on-demand")
    controller = SceneController(scene)
    commands = await controller.run(Drift())
    if not checked:
        assert len(commands) == 1, "an unchecked drift replaces whatever it costs"
        return
    assert commands == []
    [message] = controller.messages("DisruptionBlocked")
    assert "Replacement would cost more than the node ($0.0500/h > $0.0300/h)" in message
