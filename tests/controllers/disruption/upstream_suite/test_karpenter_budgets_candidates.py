"""Karpenter's disruption budgets and candidate filtering, ported from
consolidation_test.go Context("Budgets") and suite_test.go (BuildDisruptionBudgetMapping,
Candidate Filtering, Pod Eviction Cost). Each test names the ``It(...)`` it comes from."""

from __future__ import annotations

from typing import Any

import pytest
from ksuite import (
    LEAST_EXPENSIVE,
    MOST_EXPENSIVE,
    Scene,
    SceneController,
    decide,
    karpenter_scene,
    machine,
)

from karpy.controllers.disruption import Candidate, build_candidate
from karpy.controllers.disruption._candidates import EVENTUAL, GRACEFUL, eviction_cost
from karpy.controllers.disruption._drift import Drift
from karpy.controllers.disruption._singlenode import SingleNodeConsolidation

LABELS = {"app": "test"}
DNR = {"karpenter.sh/do-not-disrupt": "true"}


def ten_expensive(budget: str) -> Scene:
    """consolidation_test.go Context("Budgets")'s BeforeEach: ten consolidatable nodes of
    the most expensive type, one 100m pod each (all ten fit on any one of them)."""
    scene = karpenter_scene(budgets=[{"nodes": budget}])
    for i in range(10):
        machine(scene, f"node-{i}", MOST_EXPENSIVE, cpu="32", memory="128Gi")
        scene.pod(f"pod-{i}", f"node-{i}", cpu="100m", memory="10Mi", labels=LABELS)
    return scene


async def test_should_only_allow_3_nodes_to_be_deleted_in_multi_node_consolidation() -> None:
    """consolidation_test.go Context("Budgets") It("should only allow 3 nodes to be
    deleted in multi node consolidation delete")"""
    [command] = await decide(ten_expensive("30%"))
    assert command.consolidation_type == "multi"
    assert str(command.decision) == "delete"
    assert len(command.candidates) == 3


async def test_should_allow_no_nodes_to_be_deleted() -> None:
    """consolidation_test.go Context("Budgets") It("should allow no nodes from each
    nodePool to be deleted")"""
    assert await decide(ten_expensive("0%")) == []


async def test_should_only_allow_3_nodes_in_single_node_consolidation() -> None:
    """consolidation_test.go Context("Budgets") It("should only allow 3 nodes to be
    deleted in single node consolidation delete"): single-node consolidation stops at
    its first command, within the 3 the budget leaves."""
    scene = ten_expensive("30%")
    controller = SceneController(scene)
    [command] = await controller.run(SingleNodeConsolidation())
    assert len(command.candidates) == 1
    context = await controller.context(SingleNodeConsolidation())
    assert context.budgets.left("default") == 3


def budget_left(scene: Scene, reason: str = "Underutilized") -> int:
    controller = SceneController(scene)
    return controller.budgets(reason, record=False).left("default")  # type: ignore[arg-type]


def test_unmanaged_nodes_do_not_count() -> None:
    """suite_test.go BuildDisruptionBudgetMapping It("should not consider nodes that are
    not managed as part of disruption count"): 10 % of 10 managed nodes is 1; an
    unmanaged NotReady node does not use it up."""
    scene = karpenter_scene(budgets=[{"nodes": "10%"}])
    for i in range(10):
        machine(scene, f"node-{i}", LEAST_EXPENSIVE)
    scene.unmanaged("other", cpu="4", memory="4Gi")
    assert budget_left(scene) == 1


def test_uninitialized_nodes_do_not_count() -> None:
    """suite_test.go It("should not consider nodes that are not initialized as part of
    disruption count"): 10 % of 10 initialized nodes, a NotReady uninitialized one
    counts for neither."""
    scene = karpenter_scene(budgets=[{"nodes": "10%"}])
    for i in range(10):
        machine(scene, f"node-{i}", LEAST_EXPENSIVE)
    machine(scene, "new", LEAST_EXPENSIVE, initialized=False, ready=False)
    assert budget_left(scene) == 1


def test_the_budget_never_goes_negative() -> None:
    """suite_test.go It("should not return a negative disruption value")"""
    scene = karpenter_scene(budgets=[{"nodes": "10%"}])
    for i in range(10):
        machine(scene, f"node-{i}", LEAST_EXPENSIVE, ready=i >= 3)
    assert budget_left(scene) == 0


@pytest.mark.parametrize("state", ["deleting", "not ready"])
def test_deleting_and_not_ready_nodes_use_the_budget_up(state: str) -> None:
    """suite_test.go It("should consider nodes with a deletion timestamp set and
    MarkedForDeletion to the disruption count") / It("should consider not ready nodes
    to the disruption count"): 50 % of 10 is 5, one is already disrupting."""
    scene = karpenter_scene(budgets=[{"nodes": "50%"}])
    for i in range(10):
        machine(scene, f"node-{i}", LEAST_EXPENSIVE,
                deleting=i == 0 and state == "deleting", ready=not (i == 0 and state != "deleting"))
    assert budget_left(scene) == 4


def verdict(scene: Scene, node: str, cls: Any = GRACEFUL) -> Candidate | list[str]:
    state = scene.cluster.node_by_name(node)
    assert state is not None
    return build_candidate(state, scene.snapshot(), cls)


def mirror_or_not(pod: dict[str, Any]) -> None:
    """A pod owned by a Node is a mirror pod: its owner is a core (v1) Node."""
    for ref in pod["metadata"].get("ownerReferences") or ():
        if ref["kind"] == "Node":
            ref["apiVersion"] = "v1"


def one_node(**kw: Any) -> Scene:
    scene = karpenter_scene()
    machine(scene, "node", LEAST_EXPENSIVE, cpu="32", memory="32Gi", **kw)
    return scene


def test_do_not_disrupt_pods_without_grace_period_block() -> None:
    """suite_test.go Candidate Filtering It("should not consider candidates that have
    do-not-disrupt pods scheduled and no terminationGracePeriod")"""
    scene = one_node()
    scene.pod("pod", "node", annotations=DNR)
    assert verdict(scene, "node") == [
        'pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/pod)']


@pytest.mark.parametrize("owner", ["Node", "DaemonSet"])
def test_do_not_disrupt_mirror_and_daemonset_pods_block(owner: str) -> None:
    """suite_test.go It("should not consider candidates that have do-not-disrupt mirror
    pods scheduled") / It("... do-not-disrupt daemonset pods scheduled")"""
    scene = one_node()
    mirror_or_not(scene.pod("pod", "node", annotations=DNR, owner_kind=owner))
    assert isinstance(verdict(scene, "node"), list)


@pytest.mark.parametrize("cls", [EVENTUAL, GRACEFUL])
def test_grace_period_lets_eventual_disruption_past_do_not_disrupt(cls: Any) -> None:
    """suite_test.go It("should consider candidates that have do-not-disrupt pods
    scheduled with a terminationGracePeriod set for eventual disruption") / It("should
    not consider ... with a terminationGracePeriod set for graceful disruption")"""
    scene = one_node(grace="300s")
    scene.pod("pod", "node", annotations=DNR)
    assert isinstance(verdict(scene, "node", cls), Candidate) == (cls == EVENTUAL)


def test_eventual_without_grace_period_is_blocked() -> None:
    """suite_test.go It("should not consider candidates that have do-not-disrupt pods
    scheduled without a terminationGracePeriod set for eventual disruption")"""
    scene = one_node()
    scene.pod("pod", "node", annotations=DNR)
    assert isinstance(verdict(scene, "node", EVENTUAL), list)


@pytest.mark.parametrize("phase", ["terminating", "Succeeded"])
def test_do_not_disrupt_on_terminating_or_terminal_pods_does_not_block(phase: str) -> None:
    """suite_test.go It("should consider candidates that have do-not-disrupt terminating
    pods") / It("should consider candidates that have do-not-disrupt terminal pods")"""
    scene = one_node()
    if phase == "terminating":
        scene.pod("pod", "node", annotations=DNR, deleting=True, phase="Running")
    else:
        scene.pod("pod", "node", annotations=DNR, phase=phase)
    assert isinstance(verdict(scene, "node"), Candidate)


def fully_blocking_pdb(scene: Scene, name: str = "pdb") -> None:
    scene.pdbs.append({"metadata": {"name": name, "namespace": "default"},
                       "spec": {"selector": {"matchLabels": LABELS}, "maxUnavailable": 0},
                       "status": {"disruptionsAllowed": 0}})


def test_multiple_pdbs_on_one_pod_block() -> None:
    """suite_test.go It("should not consider candidates that have multiple PDBs on the
    same pod")"""
    scene = one_node()
    scene.pod("pod", "node", labels=LABELS)
    for name in ("pdb-1", "pdb-2"):
        scene.pdbs.append({"metadata": {"name": name, "namespace": "default"},
                           "spec": {"selector": {"matchLabels": LABELS}, "maxUnavailable": 5},
                           "status": {"disruptionsAllowed": 5}})
    assert verdict(scene, "node") == [
        "eviction does not support multiple PDBs "
        "(PodDisruptionBudget(s)=[default/pdb-1, default/pdb-2])"]


@pytest.mark.parametrize(("owner", "blocked"), [("ReplicaSet", True), ("DaemonSet", True),
                                                ("Node", False)])
def test_fully_blocking_pdbs(owner: str, blocked: bool) -> None:
    """suite_test.go It("should not consider candidates that have fully blocking PDBs") /
    It("... fully blocking PDBs on daemonset pods") / It("should consider candidates
    that have fully blocking PDBs on mirror pods") (mirror pods are never evicted)"""
    scene = one_node()
    mirror_or_not(scene.pod("pod", "node", labels=LABELS, owner_kind=owner))
    fully_blocking_pdb(scene)
    assert isinstance(verdict(scene, "node"), list) == blocked


@pytest.mark.parametrize("state", ["terminal", "terminating"])
def test_fully_blocking_pdbs_on_terminal_or_terminating_pods_do_not_block(state: str) -> None:
    """suite_test.go It("should consider candidates that have fully blocking PDBs on
    terminal pods") / It("... on terminating pods")"""
    scene = one_node()
    if state == "terminal":
        scene.pod("pod", "node", labels=LABELS, phase="Succeeded")
    else:
        scene.pod("pod", "node", labels=LABELS, deleting=True, phase="Running")
    fully_blocking_pdb(scene)
    assert isinstance(verdict(scene, "node"), Candidate)


def test_nominated_deleting_and_uninitialized_nodes_are_not_candidates() -> None:
    """suite_test.go It("should not consider candidates that are nominated") / It("...
    that are deleting") / It("... that aren't yet initialized")"""
    scene = karpenter_scene()
    machine(scene, "nominated", LEAST_EXPENSIVE)
    machine(scene, "deleting", LEAST_EXPENSIVE, deleting=True)
    machine(scene, "new", LEAST_EXPENSIVE, initialized=False)
    scene.cluster.nominate_node("test:///nominated")
    assert verdict(scene, "nominated") == ["node is nominated for a pending pod"]
    assert verdict(scene, "deleting") == ["node is deleting or marked for deletion"]
    assert verdict(scene, "new") == ["node isn't initialized"]


def test_a_node_of_a_missing_nodepool_is_not_a_candidate() -> None:
    """suite_test.go It("should not consider candidates that are have a non-existent
    NodePool")"""
    scene = karpenter_scene()
    machine(scene, "node", LEAST_EXPENSIVE, pool="gone")
    assert verdict(scene, "node") == ["NodePool not found (NodePool=gone)"]


def test_candidates_without_price_labels_or_a_known_type_are_still_candidates() -> None:
    """suite_test.go It("should consider candidates that do not have the
    karpenter.sh/capacity-type label") / It("... the topology.kubernetes.io/zone
    label") / It("should consider candidates that have an instance type that cannot be
    resolved"): a candidate all the same (emptiness and drift need no price);
    consolidation then refuses it with its reason."""
    scene = karpenter_scene()
    machine(scene, "no-ct", LEAST_EXPENSIVE, capacity_type=None)
    machine(scene, "unknown", "retired", cpu="4", memory="4Gi")
    assert isinstance(verdict(scene, "no-ct"), Candidate)
    unknown = verdict(scene, "unknown")
    assert isinstance(unknown, Candidate)
    assert unknown.instance_type is None and unknown.price == 0.0


async def test_drift_takes_a_candidate_without_a_known_instance_type() -> None:
    """suite_test.go It("should consider candidates that have an instance type that
    cannot be resolved"), as drift sees it: the node is replaced."""
    scene = karpenter_scene()
    machine(scene, "unknown", "retired", cpu="4", memory="4Gi", drifted=True,
            consolidatable_=False)
    scene.pod("pod", "unknown", cpu="10m", memory="10Mi")
    [command] = await SceneController(scene).run(Drift())
    assert len(command.replacements) == 1


def pod_dict(annotations: dict[str, str] | None = None, priority: int | None = None) -> Any:
    spec: dict[str, Any] = {}
    if priority is not None:
        spec["priority"] = priority
    return {"metadata": {"annotations": annotations or {}}, "spec": spec}


def test_pod_eviction_cost() -> None:
    """suite_test.go Describe("Pod Eviction Cost"): standard 1.0; higher/lower with a
    positive/negative pod-deletion-cost; ordered by deletion cost; higher/lower with
    priority."""
    key = "controller.kubernetes.io/pod-deletion-cost"
    assert eviction_cost(pod_dict()) == 1.0
    assert eviction_cost(pod_dict({key: "100"})) > 1.0
    assert eviction_cost(pod_dict({key: "-100"})) < 1.0
    costs = [eviction_cost(pod_dict({key: str(v)})) for v in (-1000, -100, 0, 100, 1000)]
    assert costs == sorted(costs) and len(set(costs)) == 5
    assert eviction_cost(pod_dict(priority=1)) > 1.0
    assert eviction_cost(pod_dict(priority=-1)) < 1.0


async def test_should_allow_2_nodes_from_each_nodepool_with_the_allowed_disruptions_gauge() -> None:
    """consolidation_test.go Context("Budgets") It("should allow 2 nodes from each
    nodePool to be deleted"): ten NodePools of three empty nodes, budget 50 % (1.5
    rounds up to 2); karpenter_nodepools_allowed_disruptions says 2 for each, and one
    command deletes 20 nodes."""
    scene = karpenter_scene()
    for i in range(10):
        pool = f"np-{i}"
        scene.pool(pool, consolidateAfter="0s", consolidationPolicy="WhenEmptyOrUnderutilized",
                   budgets=[{"nodes": "50%"}])
        for j in range(3):
            machine(scene, f"{pool}-{j}", MOST_EXPENSIVE, pool=pool, cpu="32", memory="128Gi")
    controller = SceneController(scene)
    commands = []
    for method in controller.methods:
        commands = await controller.run(method)
        if commands:
            break
    [command] = commands
    assert len(command.candidates) == 20
    for i in range(10):
        assert controller.metric("karpenter_nodepools_allowed_disruptions",
                                 nodepool=f"np-{i}", reason="Empty") == 2
