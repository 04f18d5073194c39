"""Karpenter's consolidation_test.go spot-to-spot truncation and minValues cases,
ported: a spot replacement launches with the cheapest 15 instance types (or as many as
the NodePool's minValues need, if more), chosen by price. Each test names the ``It(...)``
it comes from."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from ksuite import Scene, SceneController, karpenter_scene, machine, names
from upstream_fake import new_instance_type

from karpy.controllers.settings import FeatureGates, Settings
from karpy.scheduling import Offering

SPOT_TO_SPOT = Settings(feature_gates=FeatureGates(spot_to_spot_consolidation=True))


def eighteen_spot_types() -> list[Any]:
    """Eighteen spot types priced 1.0, 1.1, ... in order, except the 17th, the cheapest
    of all (0.001), outside the first 15."""
    prices = [1.0 + i * 0.1 for i in range(18)]
    prices[16] = 0.001
    return [new_instance_type(f"spot-{i}", offerings=[
        Offering(zone="test-zone-1", capacity_type="spot", price=p)]) for i, p in enumerate(prices)]


@pytest.mark.parametrize(("min_values", "expected"), [(None, 15), (16, 16), (10, 15)],
                         ids=["no-minValues", "minValues-16", "minValues-10"])
async def test_spot_to_spot_consolidation_truncates_by_price(
    min_values: int | None, expected: int,
) -> None:
    """consolidation_test.go It("spot to spot consolidation should order the instance
    types by price before enforcing minimum flexibility.") / It("spot to spot
    consolidation should consider the max of default and minimum number of
    instanceTypeOptions from minValues in requirement for truncation if minimum number of
    instanceTypeOptions from minValues in requirement is greater than 15.") / It("spot to
    spot consolidation should consider the default for truncation if minimum number of
    instanceTypeOptions from minValues in requirement is less than 15.")"""
    types = eighteen_spot_types()
    requirements = [] if min_values is None else [
        {"key": "node.kubernetes.io/instance-type", "operator": "Exists",
         "minValues": min_values}]
    scene = karpenter_scene(types=types, requirements=requirements)
    machine(scene, "node", "spot-17", cpu="4", memory="4Gi", capacity_type="spot")
    scene.pod("pod", "node", cpu="10m", memory="10Mi", labels={"app": "test"})
    _, [command] = await SceneController(scene, SPOT_TO_SPOT).decide_validated()
    assert names([command]) == [("Underutilized", "replace", ["node"], 1)]
    [replacement] = command.replacements
    by_price = sorted(types, key=lambda it: it.offerings[0].price)
    assert set(replacement.instance_type_names) == {it.name for it in by_price[:expected]}
    assert "spot-16" in replacement.instance_type_names
    assert "spot-17" not in replacement.instance_type_names


def min_values_scene() -> Scene:
    """Three 4-CPU nodes of "current-on-demand" ($0.5) under minValues 2 on the instance
    type; "other-on-demand" costs $0.4. One 2-CPU pod on each of the first two nodes, two
    on the third."""
    current = new_instance_type("current-on-demand", cpu=5, offerings=[
        Offering(zone="test-zone-1a", capacity_type="on-demand", price=0.5)])
    other = new_instance_type("other-on-demand", cpu=5, offerings=[
        Offering(zone="test-zone-1a", capacity_type="on-demand", price=0.4)])
    scene = karpenter_scene(types=[current, other], requirements=[
        {"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 2},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ])
    for i in range(3):
        machine(scene, f"node-{i}", "current-on-demand", cpu="4", memory="4Gi",
                zone="test-zone-1a", capacity_type="on-demand")
    for i, node in enumerate(("node-0", "node-1", "node-2", "node-2")):
        scene.pod(f"pod-{i}", node, cpu="2", memory="10Mi")
    return scene


async def test_should_handle_failing_filter_out_same_instance_type_when_min_values_unmet() -> None:
    """consolidation_test.go It("should handle failing filterOutSameInstanceType correctly
    (without a panic) when minValues isn't satisfied"): merging the two half-used nodes
    leaves one type besides their own, short of minValues 2; one of them is deleted
    instead. With karpy's N into M off (Karpenter's behaviour)."""
    settings = dataclasses.replace(SPOT_TO_SPOT, multi_node_split_consolidation=False)
    _, commands = await SceneController(min_values_scene(), settings).decide_validated()
    [(reason, decision, candidates, replacements)] = names(commands)
    assert (reason, decision, replacements) == ("Underutilized", "delete", 0)
    assert candidates in (["node-0"], ["node-1"])


async def test_min_values_scene_n_into_m() -> None:
    """The same scene with N into M on (karpy's default, a documented difference): the
    three $0.5 nodes become two nodes of at most $0.5 each, both with the two types
    minValues asks for."""
    _, commands = await SceneController(min_values_scene(), SPOT_TO_SPOT).decide_validated()
    [command] = commands
    assert names(commands) == [("Underutilized", "replace", ["node-0", "node-1", "node-2"], 2)]
    for plan in command.replacements:
        assert set(plan.instance_type_names) == {"current-on-demand", "other-on-demand"}
