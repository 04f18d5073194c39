"""Karpenter's drift_test.go, ported: each test names the ``It(...)`` it comes from and
decides over Karpenter's fake catalogue (see ``ksuite``). The file's BeforeEach: a
NodePool with consolidateAfter 1h and a 100 % budget; a drifted node of the most
expensive type with 32 CPUs, not Consolidatable."""

from __future__ import annotations

from typing import Any

from ksuite import MOST_EXPENSIVE, Scene, SceneController, decide, karpenter_scene, machine, names
from upstream_fake import new_instance_type

from karpy.controllers.disruption._drift import Drift
from karpy.scheduling import Offering

LABELS = {"app": "test"}


def drift_scene(**pool: Any) -> Scene:
    return karpenter_scene(consolidate_after=pool.pop("consolidate_after", "1h"), **pool)


def drifted(scene: Scene, name: str = "node", **kw: Any) -> None:
    kw.setdefault("cpu", "32")
    kw.setdefault("memory", "128Gi")
    machine(scene, name, kw.pop("type_name", MOST_EXPENSIVE), drifted=kw.pop("drift", True),
            consolidatable_=kw.pop("consolidatable_", False), **kw)


async def test_should_continue_to_the_next_drifted_node_if_the_first_cannot_reschedule() -> None:
    """drift_test.go It("should continue to the next drifted node if the first cannot
    reschedule all pods"): a 150-CPU pod fits no type; the second node goes."""
    scene = drift_scene()
    drifted(scene, "node", drifted_at="2026-11-23T09:00:00Z")
    scene.pod("huge", "node", cpu="150", memory="10Mi")
    drifted(scene, "node-2", cpu="1", drifted_at="2026-11-23T10:00:00Z")
    scene.pod("small", "node-2", cpu="1", memory="10Mi")
    assert names(await decide(scene)) == [("Drifted", "replace", ["node-2"], 1)]


async def test_should_ignore_nodes_without_the_drifted_status_condition() -> None:
    """drift_test.go It("should ignore nodes without the drifted status condition")"""
    scene = drift_scene()
    drifted(scene, drift=False)
    assert await decide(scene) == []


async def test_should_ignore_nodes_with_the_do_not_disrupt_annotation_set_to_true() -> None:
    """drift_test.go It("should ignore nodes with the karpenter.sh/do-not-disrupt
    annotation set to true")"""
    scene = drift_scene()
    drifted(scene, node_annotations={"karpenter.sh/do-not-disrupt": "true"})
    assert await decide(scene) == []


async def test_should_delete_drifted_nodes_with_do_not_disrupt_set_to_false() -> None:
    """drift_test.go It("should delete drifted nodes with the karpenter.sh/do-not-disrupt
    annotation set to false"): its pod fits on the other (not drifted) node."""
    scene = drift_scene()
    drifted(scene, node_annotations={"karpenter.sh/do-not-disrupt": "false"})
    drifted(scene, "node-2", drift=False)
    scene.pod("pod", "node", cpu="10m", memory="10Mi", labels=LABELS)
    assert names(await decide(scene)) == [("Drifted", "delete", ["node"], 0)]


async def test_should_not_create_replacements_for_do_not_disrupt_pods() -> None:
    """drift_test.go It("should not create replacements for drifted nodes that have pods
    with the karpenter.sh/do-not-disrupt annotation set to true"): without a
    terminationGracePeriod the node is not a candidate at all."""
    scene = drift_scene()
    drifted(scene)
    scene.pod("pod", "node", cpu="10m", memory="10Mi",
              annotations={"karpenter.sh/do-not-disrupt": "true"})
    assert await decide(scene) == []


async def test_should_not_create_replacements_for_do_not_disrupt_pods_with_a_grace_period() -> None:
    """drift_test.go It("should not create replacements for drifted nodes that have pods
    with the karpenter.sh/do-not-disrupt annotation set to true when the NodePool's
    TerminationGracePeriod is not nil"): the node is a candidate, but nothing is
    bought for a pod that stays until the deadline."""
    scene = drift_scene()
    drifted(scene, grace="300s")
    scene.pod("pod", "node", cpu="10m", memory="10Mi",
              annotations={"karpenter.sh/do-not-disrupt": "true"})
    commands = await decide(scene)
    assert [len(c.replacements) for c in commands] == [0]


async def test_should_not_create_replacements_for_blocking_pdb_pods_with_a_grace_period() -> None:
    """drift_test.go It("should not create replacements for drifted nodes that have pods
    with the blocking PDBs when the NodePool's TerminationGracePeriod is not nil")"""
    scene = drift_scene()
    drifted(scene, grace="300s")
    scene.pod("pod", "node", cpu="10m", memory="10Mi", labels={"test": "value"})
    scene.pdbs.append({"metadata": {"name": "pdb", "namespace": "default"},
                       "spec": {"selector": {"matchLabels": {"test": "value"}},
                                "maxUnavailable": 0},
                       "status": {"disruptionsAllowed": 0}})
    commands = await decide(scene)
    assert [len(c.replacements) for c in commands] == [0]


async def test_should_replace_drifted_nodes() -> None:
    """drift_test.go It("should replace drifted nodes")"""
    scene = drift_scene()
    drifted(scene)
    scene.pod("pod", "node", cpu="10m", memory="10Mi", labels=LABELS)
    [command] = await decide(scene)
    assert names([command]) == [("Drifted", "replace", ["node"], 1)]


async def test_should_delete_drifted_nodes() -> None:
    """drift_test.go It("should delete drifted nodes"): the pod fits on another node."""
    scene = drift_scene()
    drifted(scene)
    drifted(scene, "node-2", drift=False)
    scene.pod("pod", "node", cpu="10m", memory="10Mi", labels=LABELS)
    assert names(await decide(scene)) == [("Drifted", "delete", ["node"], 0)]


async def test_should_delete_drifted_nodes_when_empty_and_consolidation_is_disabled() -> None:
    """drift_test.go It("should delete drifted nodes when they are empty and
    consolidation is disabled")"""
    scene = drift_scene(consolidate_after="Never")
    drifted(scene)
    assert names(await decide(scene)) == [("Drifted", "delete", ["node"], 0)]


async def test_should_drift_empty_nodes_before_non_empty_nodes() -> None:
    """drift_test.go It("should drift empty nodes before non-empty nodes"): the empty one
    drifted later, it still goes first."""
    scene = drift_scene(consolidate_after="Never")
    drifted(scene, "busy", drifted_at="2026-11-23T09:00:00Z")
    scene.pod("pod", "busy", cpu="10m", memory="10Mi", labels=LABELS)
    drifted(scene, "empty", drifted_at="2026-11-23T10:00:00Z")
    assert names(await decide(scene)) == [("Drifted", "delete", ["empty"], 0)]


async def test_should_delete_drifted_nodes_when_empty_and_consolidatable() -> None:
    """drift_test.go It("should delete drifted nodes when they are empty and
    consolidatable"): emptiness comes first and takes it as Empty."""
    scene = drift_scene()
    drifted(scene, consolidatable_=True)
    assert names(await decide(scene)) == [("Empty", "delete", ["node"], 0)]


async def test_can_replace_drifted_nodes_with_multiple_nodes() -> None:
    """drift_test.go It("can replace drifted nodes with multiple nodes"): three 2-CPU
    pods off an 8-CPU node whose own type is no longer sold; the 3-CPU replacements
    hold one each."""
    current = new_instance_type("current-on-demand", offerings=[
        Offering(zone="test-zone-1a", capacity_type="on-demand", price=0.5, available=False)])
    replacement = new_instance_type("replacement-on-demand", cpu=3, offerings=[
        Offering(zone="test-zone-1a", capacity_type="on-demand", price=0.3)])
    scene = drift_scene(types=[current, replacement])
    drifted(scene, type_name="current-on-demand", zone="test-zone-1a",
            capacity_type="on-demand", cpu="8", memory="4Gi")
    for i in range(3):
        scene.pod(f"pod-{i}", "node", cpu="2", memory="10Mi", labels=LABELS)
    [command] = await decide(scene)
    assert names([command]) == [("Drifted", "replace", ["node"], 3)]


async def test_should_drift_one_non_empty_node_at_a_time_earliest_drift_first() -> None:
    """drift_test.go It("should drift one non-empty node at a time, starting with the
    earliest drift")"""
    scene = drift_scene()
    drifted(scene, "later", drifted_at="2026-11-23T10:00:00Z")
    drifted(scene, "earlier", drifted_at="2026-11-23T09:00:00Z")
    scene.pod("pod-0", "later", cpu="30", memory="10Mi")
    scene.pod("pod-1", "earlier", cpu="30", memory="10Mi")
    assert names(await decide(scene)) == [("Drifted", "replace", ["earlier"], 1)]


async def test_should_only_consider_3_nodes_allowed_by_budgets() -> None:
    """drift_test.go Context("Budgets") It("should only consider 3 nodes allowed to be
    disrupted because of budgets"): drift replaces one node per command, and the
    budget is what lets commands run side by side; here it allows 3 of 10."""
    scene = drift_scene(budgets=[{"nodes": "30%"}])
    for i in range(10):
        drifted(scene, f"node-{i}")
    controller = SceneController(scene)
    context = await controller.context(Drift())
    assert context.budgets.left("default") == 3
