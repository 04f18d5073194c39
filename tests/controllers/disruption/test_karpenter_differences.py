"""The decisions in which karpy's disruption used to differ from Karpenter's (issue 25:
the six it lists, then those the ported suite found), each on the smallest scene that
shows it."""

from __future__ import annotations

from disruption_support import Scene, SceneController, decide

from karpy.controllers.disruption import Candidate, Command, Decision, build_candidate, consolidate
from karpy.controllers.disruption._candidates import EVENTUAL, GRACEFUL, DisruptionClass
from karpy.controllers.disruption._drift import Drift
from karpy.controllers.disruption._emptiness import Emptiness
from karpy.scheduling import InstanceType, Offering
from karpy.scheduling import resources as res
from karpy.state import testing as t


def candidate(scene: Scene, node: str, cls: DisruptionClass = GRACEFUL) -> Candidate:
    state = scene.cluster.node_by_name(node)
    assert state is not None
    built = build_candidate(state, scene.snapshot(), cls)
    assert isinstance(built, Candidate), built
    return built


def sold(name: str, cpu: int, *offerings: tuple[str, str, float]) -> InstanceType:
    """A type sold exactly as ``(zone, capacity type, price)`` lists."""
    return InstanceType.build(
        name, capacity={res.CPU: cpu * 1000, res.MEMORY: 4 * cpu * t.GIB, res.PODS: 110},
        offerings=[Offering(zone=z, capacity_type=ct, price=p) for z, ct, p in offerings],
    )


def test_a_replacement_is_judged_by_its_worst_launch_price() -> None:
    # The spot type is cheap in zone-a and dear in zone-b; the launch may land in
    # either, so it is no saving over the $0.40/h node (Karpenter's WorstLaunchPrice).
    scene = Scene(types=[
        sold("od", 4, ("zone-a", "on-demand", 0.4), ("zone-b", "on-demand", 0.4)),
        sold("spotty", 4, ("zone-a", "spot", 0.1), ("zone-b", "spot", 0.5),
             ("zone-a", "on-demand", 1.0)),
    ])
    scene.pool()
    scene.machine("n", "od")
    scene.pod("a", "n", cpu="1")
    assert consolidate(scene.whatif(), [candidate(scene, "n")]) == (
        "Can't replace with a cheaper node"
    )


async def test_the_candidates_own_type_is_dropped_before_narrowing_to_spot() -> None:
    # Two on-demand-only "a" nodes, each a third used. One "a" holds both pods, so the
    # replacement may not be an "a" or dearer: Karpenter's multi-node consolidation
    # finds nothing and single-node consolidation deletes one of them. Narrowing to
    # spot first hid "a" from that rule, and karpy replaced both by one spot "b".
    scene = Scene(types=[
        sold("a", 4, ("zone-a", "on-demand", 0.4)),
        sold("b", 8, ("zone-a", "spot", 0.6)),
    ])
    scene.pool(budgets=[{"nodes": "100%"}])
    scene.machine("n0", "a")
    scene.machine("n1", "a")
    scene.pod("p0", "n0", cpu="1500m")
    scene.pod("p1", "n1", cpu="1200m")
    [command] = await decide(scene)
    assert command.consolidation_type == "single"
    assert command.decision is Decision.DELETE
    assert len(command.candidates) == 1


def test_consolidation_moves_no_pod_onto_a_node_under_consolidate_after() -> None:
    # "fresh" just got a pod; its NodePool's consolidateAfter (5m) has not passed.
    # Karpenter (v1.14, PR #3006) keeps consolidation's pods off it: "old" is replaced
    # by a smaller node instead of being emptied onto "fresh". A pending pod may still
    # go there.
    scene = Scene()
    scene.pool(consolidateAfter="5m")
    scene.machine("old", "m-4x")
    scene.machine("fresh", "m-8x", consolidatable_=False)
    scene.pod("moving", "old", cpu="1")
    scene.pod("busy", "fresh", cpu="1")
    scene.pending("waiting", cpu="1")
    outcome = consolidate(scene.whatif(), [candidate(scene, "old")])
    assert isinstance(outcome, Command), outcome
    assert outcome.decision is Decision.REPLACE
    assert outcome.results is not None
    placements = outcome.results.placements()
    assert placements["default/waiting"] == "fresh"
    assert placements.get("default/moving") != "fresh"
    [replacement] = outcome.replacements
    assert [p.key for p in replacement.pods] == ["default/moving"]


def test_drift_may_still_move_pods_onto_a_node_under_consolidate_after() -> None:
    # consolidateAfter guards consolidation only: Karpenter's drift simulation does not
    # pass the option, and a drifted node's pods go wherever there is room.
    scene = Scene()
    scene.pool(consolidateAfter="5m")
    scene.machine("drifted", "m-4x", drifted=True)
    scene.machine("fresh", "m-8x", consolidatable_=False)
    scene.pod("moving", "drifted", cpu="1")
    simulation = scene.whatif().simulate([candidate(scene, "drifted", EVENTUAL)],
                                         consolidation=False)
    assert simulation.results.placements() == {"default/moving": "fresh"}
    assert not simulation.new_nodeclaims


async def test_a_terminating_statefulset_pod_keeps_its_node_from_being_empty() -> None:
    # A StatefulSet pod is deleted before its replacement (same name) is created, so
    # Karpenter keeps it in the what-if: the node is not empty, and the pod needs room.
    scene = Scene()
    scene.pool()
    scene.machine("sts", "m-4x")
    scene.machine("other", "m-4x")
    scene.pod("db-0", "sts", cpu="1", deleting=True, owner_kind="StatefulSet",
              owner_name="db", phase="Running")
    scene.pod("busy", "other", cpu="3500m")
    victim = candidate(scene, "sts")
    assert not victim.empty
    assert [p.key for p in victim.pods] == ["default/db-0"]
    outcome = consolidate(scene.whatif(), [victim])
    assert isinstance(outcome, Command)
    assert outcome.results is not None
    assert "default/db-0" in outcome.results.placements()  # it is given a home
    [command] = await decide(scene)
    assert command.reason == "Underutilized"  # not Empty
    # A terminating pod of a Deployment does come back under another name: it is gone.
    scene = Scene()
    scene.pool()
    scene.machine("rs", "m-4x")
    scene.pod("web-abc", "rs", cpu="1", deleting=True, phase="Running")
    assert candidate(scene, "rs").empty


async def test_drift_buys_nothing_for_pods_that_will_not_leave() -> None:
    # The drifted node has a terminationGracePeriod, so its do-not-disrupt pod and the
    # pod a PodDisruptionBudget never lets go do not block drift; but they stay until
    # the deadline, and Karpenter launches a replacement only for the pod that leaves.
    scene = Scene()
    scene.pool()
    scene.machine("old", "m-8x", drifted=True, grace="1h")
    scene.pod("keep", "old", cpu="3", annotations={"karpenter.sh/do-not-disrupt": "true"})
    scene.pod("guarded", "old", cpu="3", labels={"app": "guarded"})
    scene.pod("free", "old", cpu="1")
    scene.pdbs.append({
        "metadata": {"name": "guarded", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "guarded"}}, "maxUnavailable": 0},
        "status": {"disruptionsAllowed": 0},
    })
    controller = SceneController(scene)
    [command] = await controller.run(Drift())
    assert command.reason == "Drifted"
    [replacement] = command.replacements
    assert [p.key for p in replacement.pods] == ["default/free"]
    assert replacement.instance_type_names[0] == "m-1x"


async def test_emptiness_needs_no_capacity_type_label_nor_a_known_instance_type() -> None:
    # Deleting an empty node compares no prices: Karpenter's Emptiness looks at neither.
    scene = Scene()
    scene.pool()
    scene.machine("legacy", "retired-type", capacity_type=None, cpu="4", memory="16Gi")
    empty = candidate(scene, "legacy")
    assert Emptiness().should_disrupt(empty) is True
    [command] = await decide(scene)
    assert command.reason == "Empty"
    assert [c.name for c in command.candidates] == ["legacy"]


async def test_a_node_whose_pods_cost_nothing_to_evict_is_empty() -> None:
    # Karpenter's IsEmpty: no pod contributes a positive eviction cost. A pod whose
    # pod-deletion-cost is low enough clamps to zero, so its node goes as Empty (under
    # the Empty budgets), not as Underutilized.
    scene = Scene()
    scene.pool()
    scene.machine("cheap", "m-4x")
    scene.machine("other", "m-4x")
    scene.pod("expendable", "cheap", cpu="1",
              annotations={"controller.kubernetes.io/pod-deletion-cost": "-2147483647"})
    scene.pod("busy", "other", cpu="1")
    assert candidate(scene, "cheap").empty
    assert not candidate(scene, "other").empty
    [command] = await decide(scene)
    assert command.reason == "Empty"
    assert [c.name for c in command.candidates] == ["cheap"]


def test_a_candidates_pod_not_started_yet_may_go_onto_a_node_under_consolidate_after() -> None:
    # Karpenter exempts pods in phase Pending from the destination rule, whether they
    # wait for a node or are bound and not started yet.
    scene = Scene()
    scene.pool(consolidateAfter="5m")
    scene.machine("old", "m-4x")
    scene.machine("fresh", "m-8x", consolidatable_=False)
    raw = scene.pod("starting", "old", cpu="1")
    raw["status"]["phase"] = "Pending"  # bound, containers not started (what disruption reads)
    scene.pod("busy", "fresh", cpu="1")
    outcome = consolidate(scene.whatif(), [candidate(scene, "old")])
    assert isinstance(outcome, Command), outcome
    assert outcome.decision is Decision.DELETE
    assert outcome.results is not None
    assert outcome.results.placements() == {"default/starting": "fresh"}
