"""suite_test.go's Candidate Filtering cases the first port left out: the machine's own
state (only a Node, only a NodeClaim, no NodePool label, do-not-disrupt on the Node,
already in the queue) and PDB-blocked / do-not-disrupt pods under a
terminationGracePeriod per disruption class. Each names the ``It(...)`` it comes from
and checks :func:`build_candidate`'s verdict (Karpenter's NewCandidate error)."""

from __future__ import annotations

from typing import Any

import pytest
from ksuite import LEAST_EXPENSIVE, Scene, SceneController, karpenter_scene, machine

from karpy.controllers.disruption import Candidate, build_candidate
from karpy.controllers.disruption._candidates import EVENTUAL, GRACEFUL
from karpy.runtime import freeze, thaw
from karpy.state import testing as t

LABELS = {"app": "test"}
DND = {"karpenter.sh/do-not-disrupt": "true"}


def verdict(scene: Scene, provider_id: str, cls: Any = GRACEFUL,
            queued: tuple[str, ...] = ()) -> Candidate | list[str]:
    [state] = [s for s in scene.cluster.nodes() if s.provider_id == provider_id]
    return build_candidate(state, scene.snapshot(queued=queued), cls)


def test_should_not_consider_candidates_that_has_just_a_node_representation() -> None:
    """suite_test.go It("should not consider candidates that has just a Node
    representation")"""
    scene = karpenter_scene()
    scene.unmanaged("node", cpu="32", memory="32Gi")
    assert verdict(scene, "test:///node") == ["node isn't managed by karpenter"]


def test_should_not_consider_candidate_that_has_just_a_nodeclaim_representation() -> None:
    """suite_test.go It("should not consider candidate that has just a NodeClaim
    representation")"""
    scene = karpenter_scene()
    scene.cluster.update_nodeclaim(freeze(t.nodeclaim(
        "claim", provider_id="test:///claim", labels={
            "node.kubernetes.io/instance-type": LEAST_EXPENSIVE,
            "karpenter.sh/capacity-type": "on-demand"},
        registered=True, initialized=True)))
    reasons = verdict(scene, "test:///claim")
    assert isinstance(reasons, list)
    assert reasons[0] == "nodeclaim does not have an associated node"


def test_should_not_consider_candidates_not_owned_by_a_nodepool() -> None:
    """suite_test.go It("should not consider candidates that are not owned by a NodePool
    (no karpenter.sh/nodepool label)")"""
    scene = karpenter_scene()
    machine(scene, "node", LEAST_EXPENSIVE, pool="")
    assert verdict(scene, "test:///node") == [
        "node doesn't have required label (label=karpenter.sh/nodepool)"]


def test_should_not_consider_candidates_that_have_do_not_disrupt_on_nodes() -> None:
    """suite_test.go It("should not consider candidates that have do-not-disrupt on
    nodes")"""
    scene = karpenter_scene()
    machine(scene, "node", LEAST_EXPENSIVE, node_annotations=DND)
    assert verdict(scene, "test:///node") == [
        'disruption is blocked through the "karpenter.sh/do-not-disrupt" annotation']


def test_should_not_consider_candidates_actively_being_processed_in_the_queue() -> None:
    """suite_test.go It("should not consider candidates that are actively being
    processed in the queue"): not a candidate; karpy reports no blocking reason for it
    (it is being disrupted, not blocked), where Karpenter's NewCandidate errors with
    "candidate is already being disrupted" and records no event either."""
    scene = karpenter_scene()
    machine(scene, "node", LEAST_EXPENSIVE)
    assert isinstance(verdict(scene, "test:///node"), Candidate)
    assert verdict(scene, "test:///node", queued=("test:///node",)) == []


def pdb_blocked(scene: Scene, node: str) -> None:
    scene.pod("pod", node, cpu="10m", memory="10Mi", labels=LABELS)
    scene.pdbs.append({"metadata": {"name": "pdb", "namespace": "default"},
                       "spec": {"selector": {"matchLabels": LABELS}, "maxUnavailable": 0},
                       "status": {"disruptionsAllowed": 0}})


def test_pdb_blocked_pods_with_a_grace_period_are_eventual_candidates() -> None:
    """suite_test.go It("should consider candidates that have PDB-blocked pods scheduled
    with a terminationGracePeriod set for eventual disruption") / It("should not consider
    candidates that have PDB-blocked pods scheduled with a terminationGracePeriod set for
    graceful disruption")"""
    scene = karpenter_scene()
    machine(scene, "node", LEAST_EXPENSIVE, grace="300s")
    pdb_blocked(scene, "node")
    assert isinstance(verdict(scene, "test:///node", EVENTUAL), Candidate)
    assert verdict(scene, "test:///node", GRACEFUL) == [
        "pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])"]


def test_pdb_blocked_pods_without_a_grace_period_are_not_eventual_candidates() -> None:
    """suite_test.go It("should not consider candidates that have PDB-blocked pods
    scheduled without a terminationGracePeriod set for eventual disruption")"""
    scene = karpenter_scene()
    machine(scene, "node", LEAST_EXPENSIVE)
    pdb_blocked(scene, "node")
    assert verdict(scene, "test:///node", EVENTUAL) == [
        "pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])"]


def test_do_not_disrupt_pods_with_a_grace_period_are_not_graceful_candidates() -> None:
    """suite_test.go It("should not consider candidates that have do-not-disrupt pods
    scheduled with a terminationGracePeriod set for graceful disruption") / It("should not
    consider candidates that have do-not-disrupt pods scheduled without a
    terminationGracePeriod set for eventual disruption")"""
    graceful = karpenter_scene()
    machine(graceful, "node", LEAST_EXPENSIVE, grace="300s")
    graceful.pod("pod", "node", cpu="10m", memory="10Mi", annotations=DND)
    expected = ['pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/pod)']
    assert verdict(graceful, "test:///node", GRACEFUL) == expected
    eventual = karpenter_scene()
    machine(eventual, "node", LEAST_EXPENSIVE)
    eventual.pod("pod", "node", cpu="10m", memory="10Mi", annotations=DND)
    assert verdict(eventual, "test:///node", EVENTUAL) == expected


@pytest.mark.parametrize("reason", ["Empty", "Drifted", "Underutilized"])
def test_terminating_instances_are_not_part_of_the_disruption_count(reason: str) -> None:
    """suite_test.go It("should not consider nodes that have the terminating status
    condition as part of disruption count"): a NodeClaim whose instance is terminating
    (deleting, NotReady) neither counts as a node nor uses the budget up. Karpenter's
    case uses a 100 % budget; a count of 3 here, so that the difference shows."""
    scene = karpenter_scene(budgets=[{"nodes": "3"}])
    for i in range(10):
        machine(scene, f"node-{i}", LEAST_EXPENSIVE)
    machine(scene, "terminating", LEAST_EXPENSIVE, deleting=True, ready=False)
    state = scene.cluster.node_by_name("terminating")
    assert state is not None
    claim = thaw(state.nodeclaim)
    claim["status"]["conditions"].append(
        {"type": "InstanceTerminating", "status": "True", "reason": "InstanceTerminating",
         "lastTransitionTime": "2026-11-23T11:59:00Z"})
    scene.cluster.update_nodeclaim(freeze(claim))
    budgets = SceneController(scene).budgets(reason, record=False)  # type: ignore[arg-type]
    assert budgets.left("default") == 3
