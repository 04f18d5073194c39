"""Karpenter's consolidation_test.go, ported: each test names the ``It(...)`` it comes
from and decides over Karpenter's fake catalogue (see ``ksuite``). The file's
BeforeEach: a WhenEmptyOrUnderutilized NodePool, budget 100 %, consolidateAfter 0s,
SpotToSpotConsolidation on."""

from __future__ import annotations

from typing import Any

import pytest
from ksuite import (
    LEAST_EXPENSIVE,
    LEAST_EXPENSIVE_SPOT,
    MOST_EXPENSIVE,
    MOST_EXPENSIVE_SPOT,
    Scene,
    SceneController,
    decide,
    karpenter_scene,
    machine,
    names,
)
from upstream_fake import instance_types_assorted, new_instance_type

from karpy.controllers.disruption._singlenode import SingleNodeConsolidation
from karpy.controllers.settings import FeatureGates, Settings
from karpy.scheduling import Offering, SchedulerOptions

SPOT_TO_SPOT = Settings(feature_gates=FeatureGates(spot_to_spot_consolidation=True))
LABELS = {"app": "test"}


def pods(scene: Scene, node: str, count: int, *, prefix: str = "pod", **kw: Any) -> None:
    for i in range(count):
        scene.pod(f"{prefix}-{node}-{i}", node, cpu=kw.pop("cpu", "10m"),
                  memory=kw.pop("memory", "10Mi"), labels=LABELS, **kw)


def two_cheapest(**pool: Any) -> Scene:
    """Context("Delete")'s BeforeEach: two consolidatable nodes of the cheapest
    on-demand type, 32 CPUs and 100 pods allocatable."""
    scene = karpenter_scene(**pool)
    for name in ("node-0", "node-1"):
        machine(scene, name, LEAST_EXPENSIVE, cpu="32", memory="32Gi")
    return scene


def two_one_split(scene: Scene) -> None:
    """Two pods on node-0, one on node-1 (the Delete context's usual binding)."""
    scene.pod("pod-0", "node-0", cpu="10m", memory="10Mi", labels=LABELS)
    scene.pod("pod-1", "node-0", cpu="10m", memory="10Mi", labels=LABELS)
    scene.pod("pod-2", "node-1", cpu="10m", memory="10Mi", labels=LABELS)


@pytest.mark.parametrize(("spot", "type_name"), [
    (False, MOST_EXPENSIVE), (True, MOST_EXPENSIVE_SPOT),
], ids=["on-demand", "spot"])
async def test_can_replace_node(spot: bool, type_name: str) -> None:
    """consolidation_test.go Context("Replace") DescribeTable("can replace node")
    Entry("if the candidate is on-demand node") / Entry("if the candidate is spot
    node"): the pod moves to a cheaper NodeClaim that may not be the expensive type."""
    scene = karpenter_scene()
    machine(scene, "node", type_name, cpu="32", memory="128Gi")
    scene.pod("pod", "node", cpu="10m", memory="10Mi", labels=LABELS)
    [command] = await decide(scene, SPOT_TO_SPOT)
    assert command.decision.value == "replace"
    [replacement] = command.replacements
    assert type_name not in replacement.instance_type_names
    if spot:
        assert replacement.requirements["karpenter.sh/capacity-type"].values == {"spot"}
        assert len(replacement.instance_type_names) == 15  # the 15 cheapest


async def test_cannot_replace_spot_with_spot_if_spot_to_spot_is_disabled() -> None:
    """consolidation_test.go It("cannot replace spot with spot if the
    spotToSpotConsolidation is disabled")"""
    scene = karpenter_scene()
    machine(scene, "node", MOST_EXPENSIVE_SPOT, cpu="32", memory="128Gi")
    scene.pod("pod", "node", cpu="10m", memory="10Mi", labels=LABELS)
    controller = SceneController(scene, Settings())
    assert await controller.run(SingleNodeConsolidation()) == []
    assert controller.messages("Unconsolidatable") == [
        "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"
    ]


async def test_cannot_replace_spot_with_spot_below_minimum_flexibility() -> None:
    """consolidation_test.go It("cannot replace spot with spot if less than minimum
    InstanceTypes flexibility")"""
    types = [new_instance_type(f"spot-{i}", cpu=1 + i, offerings=[
        Offering(zone="test-zone-1", capacity_type="spot", price=1.0 + i)]) for i in range(3)]
    scene = karpenter_scene(types=types)
    machine(scene, "node", "spot-2", cpu="3", memory="4Gi")
    scene.pod("pod", "node", cpu="10m", memory="10Mi", labels=LABELS)
    controller = SceneController(scene, SPOT_TO_SPOT)
    assert await controller.run(SingleNodeConsolidation()) == []
    assert controller.messages("Unconsolidatable") == [
        "SpotToSpotConsolidation requires 15 cheaper instance type options than the current "
        "candidate to consolidate, got 2"
    ]


async def test_wont_replace_node_if_any_spot_replacement_is_more_expensive() -> None:
    """consolidation_test.go It("won't replace node if any spot replacement is more
    expensive"): the replacement's spot offerings cost 0.2 to 1.0, the node 0.5."""
    current = new_instance_type("current-on-demand", offerings=[
        Offering(zone="test-zone-1a", capacity_type="on-demand", price=0.5, available=False)])
    replacement = new_instance_type("potential-spot-replacement", offerings=[
        Offering(zone="test-zone-1a", capacity_type="spot", price=1.0),
        Offering(zone="test-zone-1b", capacity_type="spot", price=0.2),
        Offering(zone="test-zone-1c", capacity_type="spot", price=0.4),
    ])
    scene = karpenter_scene(types=[current, replacement])
    machine(scene, "node", "current-on-demand", zone="test-zone-1a",
            capacity_type="on-demand", cpu="32", memory="4Gi")
    scene.pod("pod", "node", cpu="10m", memory="10Mi", labels=LABELS)
    assert await decide(scene, SPOT_TO_SPOT) == []


async def test_wont_replace_on_demand_node_if_on_demand_replacement_is_more_expensive() -> None:
    """consolidation_test.go It("won't replace on-demand node if on-demand replacement
    is more expensive"): the NodePool requires on-demand, which costs 0.6 > 0.5."""
    current = new_instance_type("current-on-demand", offerings=[
        Offering(zone="test-zone-1a", capacity_type="on-demand", price=0.5, available=False)])
    replacement = new_instance_type("on-demand-replacement", offerings=[
        Offering(zone="test-zone-1a", capacity_type="on-demand", price=0.6),
        Offering(zone="test-zone-1b", capacity_type="on-demand", price=0.6),
        Offering(zone="test-zone-1b", capacity_type="spot", price=0.2),
        Offering(zone="test-zone-1c", capacity_type="spot", price=0.3),
    ])
    scene = karpenter_scene(types=[current, replacement], requirements=[
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}])
    machine(scene, "node", "current-on-demand", zone="test-zone-1a",
            capacity_type="on-demand", cpu="32", memory="4Gi")
    scene.pod("pod", "node", cpu="10m", memory="10Mi", labels=LABELS)
    assert await decide(scene, SPOT_TO_SPOT) == []


async def test_can_delete_nodes() -> None:
    """consolidation_test.go Context("Delete") It("can delete nodes"): the node with one
    pod goes, its pod moves to the other."""
    scene = two_cheapest()
    two_one_split(scene)
    assert names(await decide(scene)) == [("Underutilized", "delete", ["node-1"], 0)]


async def test_can_delete_nodes_when_non_karpenter_capacity_can_fit_pods() -> None:
    """consolidation_test.go It("can delete nodes, when non-Karpenter capacity can fit
    pods")"""
    scene = karpenter_scene()
    machine(scene, "node-0", LEAST_EXPENSIVE, cpu="32", memory="32Gi")
    scene.unmanaged("unmanaged", cpu="32", memory="32Gi")
    pods(scene, "node-0", 3)
    assert names(await decide(scene)) == [("Underutilized", "delete", ["node-0"], 0)]


async def test_can_delete_nodes_considers_pdb() -> None:
    """consolidation_test.go It("can delete nodes, considers PDB"): the lone pod on
    node-1 may not be evicted, so node-0 (two pods) goes instead."""
    scene = two_cheapest()
    scene.pod("pod-0", "node-0", cpu="10m", memory="10Mi", labels={"app": "other"})
    scene.pod("pod-1", "node-0", cpu="10m", memory="10Mi", labels={"app": "other"})
    scene.pod("pod-2", "node-1", cpu="10m", memory="10Mi", labels=LABELS)
    scene.pdbs.append({"metadata": {"name": "pdb", "namespace": "default"},
                       "spec": {"selector": {"matchLabels": LABELS}, "maxUnavailable": 0},
                       "status": {"disruptionsAllowed": 0}})
    assert names(await decide(scene)) == [("Underutilized", "delete", ["node-0"], 0)]


async def test_can_delete_nodes_considers_do_not_disrupt_on_nodes() -> None:
    """consolidation_test.go It("can delete nodes, considers karpenter.sh/do-not-disrupt
    set to true on nodes")"""
    scene = karpenter_scene()
    machine(scene, "node-0", LEAST_EXPENSIVE, cpu="32", memory="32Gi")
    machine(scene, "node-1", LEAST_EXPENSIVE, cpu="32", memory="32Gi",
            node_annotations={"karpenter.sh/do-not-disrupt": "true"})
    two_one_split(scene)
    assert names(await decide(scene)) == [("Underutilized", "delete", ["node-0"], 0)]


async def test_can_delete_nodes_considers_do_not_disrupt_on_pods() -> None:
    """consolidation_test.go It("can delete nodes, considers karpenter.sh/do-not-disrupt
    set to true on pods")"""
    scene = two_cheapest()
    scene.pod("pod-0", "node-0", cpu="10m", memory="10Mi", labels=LABELS)
    scene.pod("pod-1", "node-0", cpu="10m", memory="10Mi", labels=LABELS)
    scene.pod("pod-2", "node-1", cpu="10m", memory="10Mi", labels=LABELS,
              annotations={"karpenter.sh/do-not-disrupt": "true"})
    assert names(await decide(scene)) == [("Underutilized", "delete", ["node-0"], 0)]


async def test_does_not_consolidate_do_not_disrupt_pods_with_a_termination_grace_period() -> None:
    """consolidation_test.go It("does not consolidate nodes with karpenter.sh/do-not-disrupt
    set to true on pods when the NodePool's TerminationGracePeriod is not nil"):
    consolidation is graceful, the grace period changes nothing."""
    scene = karpenter_scene()
    machine(scene, "node-0", LEAST_EXPENSIVE, cpu="32", memory="32Gi", grace="5m")
    scene.pod("pod-0", "node-0", cpu="10m", memory="10Mi", labels=LABELS,
              annotations={"karpenter.sh/do-not-disrupt": "true"})
    assert await decide(scene) == []


async def test_wont_delete_node_if_pods_would_schedule_on_an_uninitialized_node() -> None:
    """consolidation_test.go It("won't delete node if it would require pods to schedule
    on an uninitialized node")"""
    scene = karpenter_scene()
    machine(scene, "node-0", LEAST_EXPENSIVE, cpu="32", memory="32Gi", initialized=False)
    machine(scene, "node-1", LEAST_EXPENSIVE, cpu="32", memory="32Gi")
    pods(scene, "node-1", 3)
    controller = SceneController(scene)
    assert await controller.run(SingleNodeConsolidation()) == []
    [message] = controller.messages("Unconsolidatable")
    assert "would schedule against uninitialized node node-0" in message


async def test_should_not_consolidate_pods_onto_a_destination_under_its_consolidate_after() -> None:
    """consolidation_test.go It("should not consolidate pods onto a destination node that
    is under its consolidateAfter window"). Karpenter's test marks both NodeClaims
    Consolidatable by hand while its clock says the window is open; in karpy the
    Consolidatable condition *is* that clock, so node-0 (within its window) is not
    Consolidatable here. Before the window passes nothing happens; after, node-1 goes."""
    scene = karpenter_scene(consolidate_after="1m")
    machine(scene, "node-0", LEAST_EXPENSIVE, cpu="32", memory="32Gi", consolidatable_=False)
    machine(scene, "node-1", LEAST_EXPENSIVE, cpu="32", memory="32Gi")
    two_one_split(scene)
    assert await decide(scene) == []
    machine(scene, "node-0", LEAST_EXPENSIVE, cpu="32", memory="32Gi")  # the window passed
    assert names(await decide(scene)) == [("Underutilized", "delete", ["node-1"], 0)]


async def test_should_consolidate_pods_onto_a_destination_with_consolidate_after_never() -> None:
    """consolidation_test.go It("should consolidate pods onto a destination node with
    consolidateAfter set to Never")"""
    scene = karpenter_scene()
    scene.pool("destination", consolidateAfter="Never", budgets=[{"nodes": "100%"}],
               consolidationPolicy="WhenEmptyOrUnderutilized")
    machine(scene, "node-0", LEAST_EXPENSIVE, cpu="32", memory="32Gi")
    machine(scene, "destination", LEAST_EXPENSIVE, cpu="32", memory="32Gi",
            pool="destination", consolidatable_=False)
    scene.pod("pod", "node-0", cpu="10m", memory="10Mi", labels=LABELS)
    scene.pod("busy", "destination", cpu="10m", memory="10Mi", labels=LABELS)
    assert names(await decide(scene)) == [("Underutilized", "delete", ["node-0"], 0)]


async def test_should_replace_with_a_cheaper_node_even_when_consolidate_after_runs() -> None:
    """consolidation_test.go It("should replace a node with a cheaper one even when
    consolidateAfter has not expired")"""
    scene = karpenter_scene(consolidate_after="1m")
    machine(scene, "node", MOST_EXPENSIVE, cpu="32", memory="128Gi")
    scene.pod("pod", "node", cpu="10m", memory="10Mi", labels=LABELS)
    assert names(await decide(scene)) == [("Underutilized", "replace", ["node"], 1)]


async def test_can_delete_nodes_with_a_permanently_pending_pod() -> None:
    """consolidation_test.go It("can delete nodes with a permanently pending pod")"""
    scene = two_cheapest()
    two_one_split(scene)
    scene.pending("pending", cpu="10m", memory="10Mi", node_selector={"non-existent": "x"})
    assert names(await decide(scene)) == [("Underutilized", "delete", ["node-1"], 0)]


async def test_wont_delete_nodes_if_it_would_make_a_non_pending_pod_go_pending() -> None:
    """consolidation_test.go It("won't delete nodes if it would make a non-pending pod go
    pending")"""
    scene = karpenter_scene()
    machine(scene, "node-0", LEAST_EXPENSIVE, cpu="32", memory="32Gi", node_labels={"foo": "1"})
    machine(scene, "node-1", LEAST_EXPENSIVE, cpu="32", memory="32Gi", node_labels={"foo": "2"})
    scene.pod("pod-0", "node-0", cpu="10m", memory="10Mi", node_selector={"foo": "1"})
    scene.pod("pod-1", "node-0", cpu="10m", memory="10Mi", node_selector={"foo": "1"})
    scene.pod("pod-2", "node-1", cpu="10m", memory="10Mi", node_selector={"foo": "2"})
    assert await decide(scene) == []


async def test_should_consolidate_the_node_with_best_savings_ratio_first() -> None:
    """consolidation_test.go Context("Node Lifetime Consideration") It("should
    consolidate the node with best savings ratio first"): same price, the node with
    fewer pods (less disruption) goes."""
    scene = two_cheapest()
    pods(scene, "node-0", 1)
    pods(scene, "node-1", 3)
    [command] = await decide(scene)
    assert [c.name for c in command.candidates] == ["node-0"]


async def test_wont_delete_node_if_it_would_violate_pod_anti_affinity() -> None:
    """consolidation_test.go Context("Topology Consideration") It("won't delete node if
    it would violate pod anti-affinity"): one pod per node by hostname anti-affinity,
    and each node is already the cheapest type, so nothing can go."""
    scene = karpenter_scene()
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": LABELS}, "topologyKey": "kubernetes.io/hostname"}]}}
    for i in range(3):
        machine(scene, f"node-{i}", LEAST_EXPENSIVE, cpu="32", memory="32Gi")
        scene.pod(f"pod-{i}", f"node-{i}", cpu="10m", memory="10Mi", labels=LABELS,
                  affinity=affinity)
    assert await decide(scene) == []


@pytest.mark.parametrize("type_name", [MOST_EXPENSIVE, MOST_EXPENSIVE_SPOT],
                         ids=["on-demand", "spot"])
async def test_can_merge_3_nodes_into_1(type_name: str) -> None:
    """consolidation_test.go Context("Multi-NodeClaim") DescribeTable("can merge 3 nodes
    into 1") Entry("if the candidate is on-demand node") / Entry("if the candidate is
    spot node"): three most-expensive nodes with one small pod each are replaced by
    one cheaper NodeClaim."""
    scene = karpenter_scene()
    for i in range(3):
        machine(scene, f"node-{i}", type_name, cpu="32", memory="128Gi")
        scene.pod(f"pod-{i}", f"node-{i}", cpu="10m", memory="10Mi", labels=LABELS)
    [command] = await decide(scene, SPOT_TO_SPOT)
    assert command.consolidation_type == "multi"
    assert names([command]) == [
        ("Underutilized", "replace", ["node-0", "node-1", "node-2"], 1)]
    assert type_name not in command.replacements[0].instance_type_names


async def test_can_merge_3_nodes_into_1_with_both_spot_and_on_demand() -> None:
    """consolidation_test.go Context("Multi-NodeClaim") It("can merge 3 nodes into 1 if
    the candidates have both spot and on-demand")"""
    scene = karpenter_scene()
    for i, type_name in enumerate((MOST_EXPENSIVE, MOST_EXPENSIVE, MOST_EXPENSIVE_SPOT)):
        machine(scene, f"node-{i}", type_name, cpu="32", memory="128Gi")
        scene.pod(f"pod-{i}", f"node-{i}", cpu="10m", memory="10Mi", labels=LABELS)
    assert names(await decide(scene, SPOT_TO_SPOT)) == [
        ("Underutilized", "replace", ["node-0", "node-1", "node-2"], 1)]


@pytest.mark.parametrize("type_name", [LEAST_EXPENSIVE, LEAST_EXPENSIVE_SPOT],
                         ids=["on-demand", "spot"])
async def test_wont_merge_2_nodes_into_1_of_the_same_type(type_name: str) -> None:
    """consolidation_test.go Context("Multi-NodeClaim") DescribeTable("won't merge 2
    nodes into 1 of the same type"): replacing both by one of their own type is the
    same as deleting one; the node with the fewest pods is deleted instead."""
    scene = karpenter_scene()
    machine(scene, "node-0", type_name, cpu="32", memory="32Gi")
    machine(scene, "node-1", type_name, cpu="32", memory="32Gi")
    pods(scene, "node-0", 1)
    pods(scene, "node-1", 2)
    [command] = await decide(scene, SPOT_TO_SPOT)
    assert names([command]) == [("Underutilized", "delete", ["node-0"], 0)]


async def test_karpy_differs_split_consolidation_replaces_one_node_by_two() -> None:
    """Deliberate difference (docs/disruption.md, "Split consolidation"). Karpenter's
    computeConsolidation refuses a single node whose pods need two new NodeClaims
    ("Can't remove without creating 2 candidates"); karpy replaces it by both when
    together they cost less. Shown on the scene of consolidation_test.go It("won't
    delete node if it would violate pod anti-affinity"), with the two anti-affine pods
    sharing one expensive node; with ``split_consolidation`` off karpy decides as
    Karpenter does."""
    scene = karpenter_scene()
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": LABELS}, "topologyKey": "kubernetes.io/hostname"}]}}
    machine(scene, "node", MOST_EXPENSIVE, cpu="32", memory="128Gi")
    for i in range(2):
        scene.pod(f"pod-{i}", "node", cpu="10m", memory="10Mi", labels=LABELS,
                  affinity=affinity)
    assert names(await decide(scene)) == [("Underutilized", "replace", ["node"], 2)]
    controller = SceneController(scene, Settings(split_consolidation=False))
    assert await controller.run(SingleNodeConsolidation()) == []
    assert controller.messages("Unconsolidatable") == [
        "Can't remove without creating 2 candidates"]


async def test_can_replace_node_maintaining_zonal_topology_spread() -> None:
    """consolidation_test.go Context("Topology Consideration") It("can replace node
    maintaining zonal topology spread"): the expensive zone-2 node is replaced by a
    cheaper one in zone-2, so the spread stays 1/1/1."""
    scene = karpenter_scene()
    spread = {"app": "test-zonal-spread"}
    for i, type_name in enumerate((
        "1-cpu-1-mem-amd64-linux-test-zone-1-on-demand",
        "64-cpu-128-mem-amd64-linux-test-zone-2-on-demand",
        "1-cpu-1-mem-amd64-linux-test-zone-3-on-demand",
    )):
        machine(scene, f"node-{i}", type_name, cpu="1", memory="1Gi")
        scene.pod(f"pod-{i}", f"node-{i}", cpu="1", memory="0", labels=spread, spread=[{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": spread}}])
    [command] = await decide(scene)
    assert names([command]) == [("Underutilized", "replace", ["node-1"], 1)]
    zones = command.replacements[0].requirements["topology.kubernetes.io/zone"]
    assert zones.values == {"test-zone-2"}


async def test_cannot_replace_spot_with_spot_if_it_is_part_of_the_15_cheapest_types() -> None:
    """consolidation_test.go It("cannot replace spot with spot if it is part of the 15
    cheapest instance types."): the first 20 assorted types, the very first made a
    $0.001 spot offering; the node runs the next cheapest spot type, so only one type
    is cheaper."""
    first20 = instance_types_assorted()[:20]
    cheapest = first20[0]
    first20[0] = new_instance_type(cheapest.name, cpu=1, memory_gib=1, offerings=[
        Offering(zone="test-zone-1", capacity_type="spot", price=0.001)],
        operating_systems=("linux",))
    scene = karpenter_scene(types=first20)
    node_type = next(it for it in first20[1:] if it.name.endswith("-spot"))
    machine(scene, "node", node_type.name, cpu="1", memory="1Gi")
    scene.pod("pod", "node", cpu="10m", memory="10Mi", labels=LABELS)
    controller = SceneController(scene, SPOT_TO_SPOT)
    assert await controller.run(SingleNodeConsolidation()) == []
    assert controller.messages("Unconsolidatable") == [
        "SpotToSpotConsolidation requires 15 cheaper instance type options than the current "
        "candidate to consolidate, got 1"
    ]


async def test_should_not_consolidate_a_node_launched_for_pods_on_a_deleting_node() -> None:
    """consolidation_test.go Context("Parallelization") It("should not consolidate a node
    that is launched for pods on a deleting node"): the new node holds two of the five
    pods so far; the three still on the deleting node need its room too, so it is not
    replaced by a smaller node (without them it would be)."""
    scene = karpenter_scene()
    new_type = "8-cpu-1-mem-amd64-linux-test-zone-1-on-demand"  # the cheapest fit for 5
    machine(scene, "old", new_type, cpu="8", memory="1Gi", deleting=True)
    machine(scene, "new", new_type, cpu="8", memory="1Gi")
    for i in range(3):
        scene.pod(f"moving-{i}", "old", cpu="1", memory="10Mi", labels=LABELS)
    for i in range(2):
        scene.pod(f"rebound-{i}", "new", cpu="1", memory="10Mi", labels=LABELS)
    assert await decide(scene) == []
    without = karpenter_scene()
    machine(without, "new", new_type, cpu="8", memory="1Gi")
    for i in range(2):
        without.pod(f"rebound-{i}", "new", cpu="1", memory="10Mi", labels=LABELS)
    assert names(await decide(without)) == [("Underutilized", "replace", ["new"], 1)]


async def test_should_consider_initialized_nodes_before_uninitialized_nodes() -> None:
    """consolidation_test.go It("should consider initialized nodes before uninitialized
    nodes"): 100 nodes of 3 CPUs each hold a 2-CPU pod, one of them initialized; the
    small node's 1-CPU pod goes to that one, and no event speaks of an uninitialized
    node."""
    default = new_instance_type("default-instance-type", cpu=3, memory_gib=3, pods=110)
    small = new_instance_type("small-instance-type", cpu=1, memory_gib=1, pods=10)
    scene = karpenter_scene(types=[default, small])
    for i in range(100):
        machine(scene, f"node-{i:03d}", "default-instance-type", zone="test-zone-1",
                capacity_type="spot", cpu="3", memory="3Gi", initialized=i == 37)
        scene.pod(f"pod-{i:03d}", f"node-{i:03d}", cpu="2", memory="2Gi", labels=LABELS)
    machine(scene, "small", "small-instance-type", zone="test-zone-1", capacity_type="spot",
            cpu="1", memory="1Gi")
    scene.pod("consolidatable", "small", cpu="1", memory="1Gi", labels=LABELS)
    controller = SceneController(scene)
    [command] = await controller.run(SingleNodeConsolidation())
    assert names([command]) == [("Underutilized", "delete", ["small"], 0)]
    assert command.results is not None
    assert command.results.placements() == {"default/consolidatable": "node-037"}
    assert not any("uninitialized" in m for m in controller.messages("Unconsolidatable"))


IGNORE_PREFERENCES = SchedulerOptions(preference_policy="Ignore")


async def test_should_consolidate_a_node_through_deletion_when_ignoring_preferences() -> None:
    """consolidation_test.go Context("Preferences") It("should consolidate a node through
    deletion when ignoring preferences"): a preferred anti-affinity would keep the
    pods apart; ignored, node-1's pod joins the two on node-0."""
    scene = karpenter_scene()
    for name in ("node-0", "node-1"):
        machine(scene, name, LEAST_EXPENSIVE, cpu="5", memory="5Gi")
    apart = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "foo"}},
                                          "topologyKey": "kubernetes.io/hostname"}}]}}
    for i, node in enumerate(("node-0", "node-0", "node-1")):
        scene.pod(f"pod-{i}", node, cpu="10m", memory="10Mi", labels={"app": "foo"},
                  affinity=apart)
    assert names(await decide(scene, options=IGNORE_PREFERENCES)) == [
        ("Underutilized", "delete", ["node-1"], 0)]


async def test_should_consolidate_a_node_through_replacement_when_ignoring_preferences() -> None:
    """consolidation_test.go Context("Preferences") It("should consolidate a node through
    replacement when ignoring preferences"): the pod prefers the most expensive type;
    ignored, a cheaper one replaces it."""
    scene = karpenter_scene()
    machine(scene, "node", MOST_EXPENSIVE, cpu="32", memory="128Gi")
    prefer = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [
            {"key": "node.kubernetes.io/instance-type", "operator": "In",
             "values": [MOST_EXPENSIVE]}]}}]}}
    scene.pod("pod", "node", cpu="10m", memory="10Mi", labels={"app": "foo"},
              affinity=prefer)
    [command] = await decide(scene, options=IGNORE_PREFERENCES)
    assert names([command]) == [("Underutilized", "replace", ["node"], 1)]
    assert MOST_EXPENSIVE not in command.replacements[0].instance_type_names
