"""karpenter_consolidation_moves_total and karpenter_consolidation_score: every
consolidation move karpy weighs is counted, with its NodePool's policy; a Balanced
NodePool's moves also get their score, under the NodePool's own decision."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from disruption_support import Scene, SceneController

from karpy.controllers.disruption import Candidate, Command, _multinode
from karpy.controllers.disruption._consolidation import BalancedVerdict, PoolTotals
from karpy.controllers.disruption._method import Method


def method(controller: SceneController, kind: str) -> Method:
    return next(m for m in controller.methods if m.consolidation_type == kind)


async def test_a_balanced_move_worth_its_disruption_is_approved_with_its_score() -> None:
    scene = Scene()
    scene.pool(consolidationPolicy="Balanced")
    for name in ("a", "b"):
        scene.machine(name, "m-4x")
        scene.pod(f"{name}-pod", name, cpu="1")
    controller = SceneController(scene)
    [command] = await controller.run(method(controller, "single"))
    assert [c.name for c in command.candidates] == ["a"]
    labels = {"nodepool": "default", "policy": "Balanced", "decision": "approved"}
    assert controller.metric("karpenter_consolidation_moves_total", **labels) == 1.0
    # half the pool's cost saved for half its disruption: 0.5 / 0.5
    assert controller.metric("karpenter_consolidation_score_sum", **labels) == 1.0
    assert controller.metric("karpenter_consolidation_score_count", **labels) == 1.0


async def test_a_balanced_move_saving_little_for_much_disruption_is_rejected() -> None:
    scene = Scene()
    scene.pool(consolidationPolicy="Balanced")
    scene.machine("cheap", "m-1x")
    scene.pod("small", "cheap", cpu="100m")
    scene.machine("big", "m-32x")
    scene.pod("large", "big", cpu="20")  # needs the 32x: no cheaper move for big
    controller = SceneController(scene)
    assert await controller.run(method(controller, "single")) == []
    rejected = {"nodepool": "default", "policy": "Balanced", "decision": "rejected"}
    assert controller.metric("karpenter_consolidation_moves_total", **rejected) == 1.0
    assert controller.metric("karpenter_consolidation_moves_total", decision="approved") is None
    # $0.05 of $1.65 saved for half the pool's disruption (one pod of two, equal nodes)
    assert controller.metric("karpenter_consolidation_score_sum", **rejected) == pytest.approx(
        (0.05 / 1.65) / 0.5)
    assert controller.metric("karpenter_consolidation_score_bucket", le="0.1",
                             **rejected) == 1.0


async def test_moves_of_other_policies_are_counted_without_a_score() -> None:
    scene = Scene()
    scene.pool()  # WhenEmptyOrUnderutilized
    for name in ("a", "b"):
        scene.machine(name, "m-4x")
        scene.pod(f"{name}-pod", name, cpu="1")
    controller = SceneController(scene)
    assert len(await controller.run(method(controller, "single"))) == 1
    assert controller.metric("karpenter_consolidation_moves_total", nodepool="default",
                             policy="WhenEmptyOrUnderutilized", decision="approved") == 1.0
    assert controller.metric("karpenter_consolidation_score_count") is None


def four_alike() -> Scene:
    scene = Scene()
    scene.pool(consolidationPolicy="Balanced", budgets=[{"nodes": "100%"}])
    for name in ("a", "b", "c", "d"):
        scene.machine(name, "m-4x")
        scene.pod(f"{name}-pod", name, cpu="1")
    return scene


def refusing(monkeypatch: pytest.MonkeyPatch, at_least: int) -> None:
    """The Balanced policy refuses every move of ``at_least`` candidates or more (score
    0.2): the search's verdicts as a test wants them."""
    real = _multinode.balanced_verdict

    def verdict(command: Command, everything: Sequence[Candidate],
                totals: PoolTotals | None = None) -> BalancedVerdict:
        if len(command.candidates) >= at_least:
            return BalancedVerdict(False, {"default": (0.2, False)})
        return real(command, everything, totals)

    monkeypatch.setattr(_multinode, "balanced_verdict", verdict)


async def test_multi_node_counts_the_move_it_chose_once_not_each_prefix_it_tried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refusing(monkeypatch, at_least=3)  # the search tries three nodes first, refused
    controller = SceneController(four_alike())
    [command] = await controller.run(method(controller, "multi"))
    assert [c.name for c in command.candidates] == ["a", "b"]
    assert controller.metric("karpenter_consolidation_moves_total", nodepool="default",
                             policy="Balanced", decision="approved") == 1.0
    assert controller.metric("karpenter_consolidation_moves_total", decision="rejected") is None
    # two of the pool's four nodes for half its cost: 0.5 / 0.5
    assert controller.metric("karpenter_consolidation_score_sum", decision="approved") == 1.0


async def test_multi_node_with_every_move_refused_counts_the_last_refusal_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refusing(monkeypatch, at_least=2)
    controller = SceneController(four_alike())
    assert await controller.run(method(controller, "multi")) == []
    assert controller.metric("karpenter_consolidation_moves_total", nodepool="default",
                             policy="Balanced", decision="rejected") == 1.0
    assert controller.metric("karpenter_consolidation_score_sum", decision="rejected") == 0.2
    assert controller.metric("karpenter_consolidation_moves_total", decision="approved") is None


def approvals(controller: SceneController) -> list[tuple[str, str, str]]:
    """(kind, name, message) of each ConsolidationApproved event, in order."""
    return [(e.kind, e.name, e.message) for e in controller.recorder.events
            if e.reason == "ConsolidationApproved"]


async def test_an_approved_balanced_move_says_its_score_on_the_node_and_nodeclaim() -> None:
    scene = Scene()
    scene.pool(consolidationPolicy="Balanced")
    for name in ("a", "b"):
        scene.machine(name, "m-4x")
        scene.pod(f"{name}-pod", name, cpu="1")
    controller = SceneController(scene)
    [command] = await controller.run(method(controller, "single"))
    [candidate] = command.candidates
    # Karpenter's balanced evaluator: half the pool's cost for half its disruption
    message = "score 1.00 >= threshold 0.50 (k: 2, savings 50.0%, disruption 50.0%)"
    assert sorted(approvals(controller)) == sorted([
        ("Node", candidate.name, message),
        ("NodeClaim", candidate.nodeclaim["metadata"]["name"], message),  # type: ignore[index]
    ])


async def test_a_refused_or_unscored_move_records_no_approval() -> None:
    scene = Scene()
    scene.pool(consolidationPolicy="Balanced")
    scene.machine("cheap", "m-1x")
    scene.pod("small", "cheap", cpu="100m")
    scene.machine("big", "m-32x")
    scene.pod("large", "big", cpu="20")
    refused = SceneController(scene)
    assert await refused.run(method(refused, "single")) == []
    assert approvals(refused) == []

    other = Scene()
    other.pool()  # WhenEmptyOrUnderutilized: not scored, as upstream
    for name in ("a", "b"):
        other.machine(name, "m-4x")
        other.pod(f"{name}-pod", name, cpu="1")
    unscored = SceneController(other)
    assert len(await unscored.run(method(unscored, "single"))) == 1
    assert approvals(unscored) == []


async def test_an_approved_multi_node_move_says_its_score_on_the_nodepool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refusing(monkeypatch, at_least=3)
    controller = SceneController(four_alike())
    [command] = await controller.run(method(controller, "multi"))
    assert len(command.candidates) == 2
    assert approvals(controller) == [
        ("NodePool", "default",
         "score 1.00 >= threshold 0.50 (k: 2, savings 50.0%, disruption 50.0%)"),
    ]
