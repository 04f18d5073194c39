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

from karpy.controllers.disruption import Command
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
                    settings: Settings = SPOT_TO_SPOT) -> tuple[SceneController, list[Command]]:
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


# -- consolidation_test.go Context("TTL"), emptiness_test.go's TTL case ----------------


def ttl_nodes(type_name: str = MOST_EXPENSIVE, count: int = 2) -> Scene:
    """Context("TTL")'s BeforeEach: two consolidatable nodes of the most expensive type,
    32 CPUs and 100 pods allocatable (``count`` of them: some cases apply only one)."""
    scene = karpenter_scene()
    for name in ("node-0", "node-1")[:count]:
        machine(scene, name, type_name, cpu="32", memory="32Gi")
    return scene


async def test_should_wait_for_the_node_ttl_for_non_empty_nodes_before_consolidating() -> None:
    """consolidation_test.go Context("TTL") It("should wait for the node TTL for
    non-empty nodes before consolidating"): the pass blocks on the validation wait, then
    deletes the node with one pod (its pod fits the other)."""
    scene = ttl_nodes(LEAST_EXPENSIVE)
    scene.pod("pod-0", "node-0", cpu="10m", memory="10Mi", labels=LABELS)
    scene.pod("pod-1", "node-0", cpu="10m", memory="10Mi", labels=LABELS)
    scene.pod("pod-2", "node-1", cpu="10m", memory="10Mi", labels=LABELS)
    waited, commands = await SceneController(scene, SPOT_TO_SPOT).decide_validated()
    assert waited
    assert names(commands) == [("Underutilized", "delete", ["node-1"], 0)]


async def test_should_not_consolidate_if_the_action_picks_different_instance_types() -> None:
    """consolidation_test.go Context("TTL") It("should not consolidate if the action
    picks different instance types after the node TTL wait"): a second 1-CPU pod lands on
    the node during the wait, so the replacement chosen before no longer fits."""
    scene = ttl_nodes(count=1)
    scene.pod("pod-0", "node-0", cpu="1", memory="10Mi", labels=LABELS)
    waited, commands = await SceneController(scene, SPOT_TO_SPOT).decide_validated(
        lambda: scene.pod("pod-1", "node-0", cpu="1", memory="10Mi", labels=LABELS)
    )
    assert waited
    assert commands == []


async def test_should_not_consolidate_if_the_action_becomes_invalid_during_the_ttl_wait() -> None:
    """consolidation_test.go Context("TTL") It("should not consolidate if the action
    becomes invalid during the node TTL wait"): a do-not-disrupt pod binds to the empty
    node during the wait."""
    scene = ttl_nodes(count=1)
    waited, commands = await SceneController(scene, SPOT_TO_SPOT).decide_validated(
        lambda: scene.pod("pod-0", "node-0", cpu="10m", memory="10Mi",
                          annotations={"karpenter.sh/do-not-disrupt": "true"})
    )
    assert waited
    assert commands == []


def block_with_pdb(scene: Scene, *nodes: str) -> None:
    """A pod matching a maxUnavailable=0 PDB binds to each of ``nodes``."""
    scene.pdbs.append({"metadata": {"name": "pdb", "namespace": "default"},
                       "spec": {"selector": {"matchLabels": LABELS}, "maxUnavailable": 0},
                       "status": {"disruptionsAllowed": 0}})
    for node in nodes:
        scene.pod(f"pdb-pod-{node}", node, cpu="10m", memory="10Mi", labels=LABELS)


def block_with_do_not_disrupt(scene: Scene, *nodes: str) -> None:
    """A do-not-disrupt pod binds to each of ``nodes``."""
    for node in nodes:
        scene.pod(f"dnd-pod-{node}", node, cpu="10m", memory="10Mi",
                  annotations={"karpenter.sh/do-not-disrupt": "true"})


BLOCKERS = pytest.mark.parametrize(
    "block", [block_with_do_not_disrupt, block_with_pdb], ids=["do-not-disrupt", "pdb"]
)


@BLOCKERS
async def test_should_not_replace_node_if_a_blocking_pod_schedules_during_the_ttl_wait(
    block: Callable[..., None],
) -> None:
    """consolidation_test.go Context("TTL") It("should not replace node if a pod
    schedules with karpenter.sh/do-not-disrupt set to true during the TTL wait") /
    It("should not replace node if a pod schedules with a blocking PDB during the TTL
    wait")"""
    scene = one_used_expensive_node()
    waited, commands = await SceneController(scene, SPOT_TO_SPOT).decide_validated(
        lambda: block(scene, "node")
    )
    assert waited
    assert commands == []


@BLOCKERS
async def test_should_not_delete_node_if_blocking_pods_schedule_during_the_ttl_wait(
    block: Callable[..., None],
) -> None:
    """consolidation_test.go Context("TTL") It("should not delete node if pods schedule
    with karpenter.sh/do-not-disrupt set to true during the TTL wait") / It("should not
    delete node if pods schedule with a blocking PDB during the TTL wait"): without them
    the two nodes would consolidate into one."""
    scene = ttl_nodes()
    scene.pod("pod-0", "node-0", cpu="10m", memory="10Mi")
    scene.pod("pod-1", "node-1", cpu="10m", memory="10Mi")
    waited, commands = await SceneController(scene, SPOT_TO_SPOT).decide_validated(
        lambda: block(scene, "node-0", "node-1")
    )
    assert waited
    assert commands == []


async def test_should_wait_for_the_node_ttl_for_empty_nodes_before_consolidating() -> None:
    """emptiness_test.go It("should wait for the node TTL for empty nodes before
    consolidating")"""
    scene = karpenter_scene(policy="WhenEmpty")
    machine(scene, "node-0", LEAST_EXPENSIVE, cpu="32", memory="32Gi")
    waited, commands = await SceneController(scene).decide_validated()
    assert waited
    assert names(commands) == [("Empty", "delete", ["node-0"], 0)]


async def test_does_not_delete_nodes_with_pod_churn_deletes_nodes_without_pod_churn() -> None:
    """consolidation_test.go Context("Delete") It("does not delete nodes with pod churn,
    deletes nodes without pod churn"): a pod lands on node-0 during the wait; emptiness
    keeps the still-empty node-1 in its command."""
    scene = karpenter_scene()
    for name in ("node-0", "node-1"):
        machine(scene, name, LEAST_EXPENSIVE, cpu="32", memory="32Gi")
    controller, commands = await validated(scene, Emptiness(), churn)
    assert names(commands) == [("Empty", "delete", ["node-1"], 0)]
    assert controller.metric(FAILED, consolidation_type="empty") == 1


# -- the rejection's kind (validation.go's typed errors, getValidationFailureReason) ----


def second_cpu_pod(scene: Scene) -> None:
    """The replacement chosen for one 1-CPU pod no longer fits two."""
    scene.pod("pod-1", "node-0", cpu="1", memory="10Mi", labels=LABELS)


def do_not_disrupt_pod(scene: Scene) -> None:
    """The node stops being a candidate."""
    block_with_do_not_disrupt(scene, "node-0")


@pytest.mark.parametrize(("mutate", "kind"), [
    (blocking_budget, "budget"),
    # A nominated node is no candidate (Karpenter's GetCandidates filters it, so
    # validateCandidates returns its churn error before the nomination check).
    (nominated, "churn"),
    (do_not_disrupt_pod, "churn"),
    (second_cpu_pod, "scheduling"),
], ids=["blocked-by-budgets", "candidate-nominated", "no-longer-a-candidate",
        "new-simulation-result"])
async def test_a_rejected_consolidation_names_why_in_its_event(
    mutate: Callable[[Scene], None], kind: str
) -> None:
    """ConsolidationRejected carries Karpenter's failure reason (budget, churn or
    scheduling), as single-node consolidation's EmitRejectedEvents does."""
    scene = ttl_nodes(count=1)
    scene.pod("pod-0", "node-0", cpu="1", memory="10Mi", labels=LABELS)
    controller, commands = await validated(scene, SingleNodeConsolidation(), mutate)
    assert commands == []
    [message] = controller.messages("ConsolidationRejected")
    assert message.startswith(f"Consolidation rejected ({kind}): "), message
