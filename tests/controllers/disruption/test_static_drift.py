"""Disruption and static NodePools: never consolidated or emptied, not Drift's; drifted
nodes are StaticDrift's, replaced one for one from the template within the Drifted
budget and ``limits.nodes``."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from disruption_support import Scene

from karpy.controllers.disruption import Budgets, Candidate, build_candidate
from karpy.controllers.disruption._candidates import EVENTUAL, GRACEFUL
from karpy.controllers.disruption._consolidation import consolidatable_reason
from karpy.controllers.disruption._drift import Drift
from karpy.controllers.disruption._method import Context
from karpy.controllers.disruption._staticdrift import StaticDrift
from karpy.controllers.settings import Settings
from karpy.runtime import freeze
from karpy.runtime.testing import FakeClock


def static_scene(replicas: int, *, limits: dict[str, str] | None = None) -> Scene:
    scene = Scene()
    pool = scene.pool("static")
    pool["spec"]["replicas"] = replicas
    if limits:
        pool["spec"]["limits"] = limits
    scene.cluster.update_nodepool(freeze(pool))
    for i in range(replicas):
        scene.machine(f"s{i}", "m-2x", pool="static", drifted=True)
    return scene


def candidates(scene: Scene, disruption_class: Any = EVENTUAL) -> list[Candidate]:
    out = []
    for state in scene.cluster.nodes():
        built = build_candidate(state, scene.snapshot(), disruption_class)
        assert isinstance(built, Candidate), built
        out.append(built)
    return sorted(out, key=lambda c: c.name)


def context(scene: Scene, wanted: list[Candidate], budget: int) -> Context:
    return Context(
        whatif=scene.whatif(), candidates=wanted,
        budgets=Budgets(reason="Drifted", allowed={"static": budget},
                        remaining={"static": budget}),
        events=cast(Any, None), clock=FakeClock(), settings=Settings(),
        validate=cast(Any, None),
    )  # fmt: skip


def test_static_nodes_are_never_consolidated_and_not_drifts() -> None:
    scene = static_scene(2)
    for candidate in candidates(scene, GRACEFUL):
        assert candidate.static
        assert consolidatable_reason(candidate, empty_only=True) is False
        assert consolidatable_reason(candidate, empty_only=False) is False
    for candidate in candidates(scene):
        assert Drift().should_disrupt(candidate) is False
        assert StaticDrift(scene.cluster).should_disrupt(candidate) is True


def test_drifted_static_nodes_are_replaced_one_budget_at_a_time() -> None:
    scene = static_scene(3)
    method = StaticDrift(scene.cluster)
    wanted = [c for c in candidates(scene) if method.should_disrupt(c)]
    commands = asyncio.run(method.compute(context(scene, wanted, budget=1)))
    [command] = commands
    assert command.reason == "Drifted"
    [replacement] = command.replacements
    assert replacement.nodepool == "static" and replacement.pods == ()
    assert replacement.instance_types == ()  # the provider chooses, as for any static node
    commands = asyncio.run(method.compute(context(scene, wanted, budget=2)))
    assert len(commands) == 2
    assert len({c.candidates[0].name for c in commands}) == 2


def test_no_replacement_when_limits_nodes_leaves_no_room() -> None:
    scene = static_scene(2, limits={"nodes": "2"})
    method = StaticDrift(scene.cluster)
    wanted = [c for c in candidates(scene) if method.should_disrupt(c)]
    assert asyncio.run(method.compute(context(scene, wanted, budget=1))) == []


def test_no_replacement_while_the_pool_scales_down() -> None:
    scene = static_scene(3)
    pool = scene.pools["static"]
    pool["spec"]["replicas"] = 2
    scene.cluster.update_nodepool(freeze(pool))
    method = StaticDrift(scene.cluster)
    wanted = [c for c in candidates(scene) if method.should_disrupt(c)]
    assert asyncio.run(method.compute(context(scene, wanted, budget=1))) == []
