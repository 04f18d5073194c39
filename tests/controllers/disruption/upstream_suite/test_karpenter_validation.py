"""Karpenter's validation cases, ported: the ``TestEmptinessValidator`` /
``TestConsolidationValidator`` helpers of validation_test.go drive consolidation_test.go's
Context("Metrics") "should correctly report invalidated commands" tables, and the
Context("TTL") cases (and emptiness_test.go's TTL case) run the controller with the real
validator. Here each method runs through karpy's real validation step
(:meth:`SceneController.run_validated`): the scene changes while the method waits out
the validation delay, then the clock moves on."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from ksuite import (
    LEAST_EXPENSIVE,
    MOST_EXPENSIVE,
    Scene,
    SceneController,
    karpenter_scene,
    machine,
    names,
)

from karpy.controllers.disruption._emptiness import Emptiness
from karpy.controllers.disruption._method import Method
from karpy.controllers.disruption._multinode import MultiNodeConsolidation
from karpy.controllers.disruption._singlenode import SingleNodeConsolidation
from karpy.controllers.settings import FeatureGates, Settings
from karpy.runtime import freeze

SPOT_TO_SPOT = Settings(feature_gates=FeatureGates(spot_to_spot_consolidation=True))
LABELS = {"app": "test"}
FAILED = "karpenter_voluntary_disruption_failed_validations_total"

# -- validation_test.go's mutations (what changes during the validation wait) ----------


def blocking_budget(scene: Scene) -> None:
    """validation_test.go blockingBudget: the NodePool's budget becomes 0 %."""
    pool = scene.pools["default"]
    pool["spec"]["disruption"]["budgets"] = [{"nodes": "0%"}]
    scene.cluster.update_nodepool(freeze(pool))


def churn(scene: Scene) -> None:
    """validation_test.go churn: a 100m pod lands on the first node, which is nominated."""
    first = sorted(scene.pods)[0]
    scene.pod("churn-pod", first, cpu="100m", memory="10Mi", labels=LABELS)
    scene.cluster.nominate_node(f"test:///{first}")


def nominated(scene: Scene) -> None:
    """validation_test.go nominated: every node is nominated for a pod."""
    for name in scene.pods:
        scene.cluster.nominate_node(f"test:///{name}")


def nothing(_scene: Scene) -> None:
    """No change: the command survives validation (the tables' control case)."""


MUTATIONS = pytest.mark.parametrize(
    "mutate", [blocking_budget, churn, nominated],
    ids=["blocked-by-budgets", "pod-churn", "candidate-nominated"],
)


async def validated(scene: Scene, method: Method, mutate: Callable[[Scene], None],
                    settings: Settings = SPOT_TO_SPOT) -> tuple[SceneController, list]:  # type: ignore[type-arg]
    controller = SceneController(scene, settings)
    blocked, commands = await controller.run_validated(method, lambda: mutate(scene))
    assert blocked, "the method did not wait out the validation delay"
    return controller, commands


# -- consolidation_test.go Context("Metrics") ------------------------------------------


def one_empty_node() -> Scene:
    scene = karpenter_scene()
    machine(scene, "node", MOST_EXPENSIVE, cpu="32", memory="32Gi")
    return scene


@MUTATIONS
async def test_should_correctly_report_invalidated_commands_for_emptiness_disruption(
    mutate: Callable[[Scene], None],
) -> None:
    """consolidation_test.go Context("Metrics") DescribeTable("should correctly report
    invalidated commands for emptiness disruption") Entry("when a candidate is blocked
    by budgets") / Entry("when candidates are filtered out due to pod churn") /
    Entry("when candidates are filtered out due to candidate being nominated")"""
    controller, commands = await validated(one_empty_node(), Emptiness(), mutate)
    assert commands == []
    assert controller.metric(FAILED, consolidation_type="empty") == 1


async def test_emptiness_command_survives_validation_without_change() -> None:
    """Control for the table above: unchanged, the empty node is deleted."""
    controller, commands = await validated(one_empty_node(), Emptiness(), nothing)
    assert names(commands) == [("Empty", "delete", ["node"], 0)]
    assert controller.metric(FAILED, consolidation_type="empty") is None


def two_used_expensive_nodes() -> Scene:
    """The multi-node table's scene: a 32-CPU and a 1-CPU node of the most expensive
    type, one ReplicaSet pod on each."""
    scene = karpenter_scene()
    machine(scene, "node", MOST_EXPENSIVE, cpu="32", memory="32Gi")
    machine(scene, "node2", MOST_EXPENSIVE, cpu="1", memory="32Gi")
    scene.pod("pod-0", "node", cpu="10m", memory="10Mi", labels=LABELS)
    scene.pod("pod-1", "node2", cpu="10m", memory="10Mi", labels=LABELS)
    return scene


@MUTATIONS
async def test_should_correctly_report_invalidated_commands_for_multi_node_disruption(
    mutate: Callable[[Scene], None],
) -> None:
    """consolidation_test.go Context("Metrics") DescribeTable("should correctly report
    invalidated commands for multi node disruption") Entry("when candidates are blocked
    by budgets") / Entry("when candidates are filtered out due to pod churn") /
    Entry("when candidates are filtered out due to candidate being nominated"): both
    candidates count as failed validations."""
    controller, commands = await validated(
        two_used_expensive_nodes(), MultiNodeConsolidation(), mutate
    )
    assert commands == []
    assert controller.metric(FAILED, consolidation_type="multi") == 2


async def test_multi_node_command_survives_validation_without_change() -> None:
    """Control for the table above: unchanged, both nodes go for one cheaper one."""
    controller, commands = await validated(
        two_used_expensive_nodes(), MultiNodeConsolidation(), nothing
    )
    assert names(commands) == [("Underutilized", "replace", ["node", "node2"], 1)]
    assert controller.metric(FAILED, consolidation_type="multi") is None


def one_used_expensive_node() -> Scene:
    scene = karpenter_scene()
    machine(scene, "node", MOST_EXPENSIVE, cpu="32", memory="32Gi")
    scene.pod("pod-0", "node", cpu="10m", memory="10Mi", labels=LABELS)
    return scene


@MUTATIONS
async def test_should_correctly_report_invalidated_commands_for_single_node_disruption(
    mutate: Callable[[Scene], None],
) -> None:
    """consolidation_test.go Context("Metrics") DescribeTable("should correctly report
    invalidated commands for single node disruption") Entry("when a candidate is blocked
    by budgets") / Entry("when candidates are filtered out due to pod churn") /
    Entry("when candidates are filtered out due to candidate being nominated")"""
    controller, commands = await validated(
        one_used_expensive_node(), SingleNodeConsolidation(), mutate
    )
    assert commands == []
    assert controller.metric(FAILED, consolidation_type="single") == 1


async def test_single_node_command_survives_validation_without_change() -> None:
    """Control for the table above: unchanged, the node is replaced by a cheaper one."""
    controller, commands = await validated(
        one_used_expensive_node(), SingleNodeConsolidation(), nothing
    )
    assert names(commands) == [("Underutilized", "replace", ["node"], 1)]
    assert controller.metric(FAILED, consolidation_type="single") is None
