"""consolidation_test.go cases the first port left out, ported. Each names the
``It(...)`` it comes from and decides over Karpenter's fake catalogue (see
``ksuite``)."""

from __future__ import annotations

from ksuite import (
    LEAST_EXPENSIVE,
    MOST_EXPENSIVE,
    Scene,
    SceneController,
    decide,
    karpenter_scene,
    machine,
    names,
)

from karpy.controllers.disruption import Candidate, build_candidate
from karpy.controllers.disruption._candidates import GRACEFUL
from karpy.controllers.settings import FeatureGates, Settings
from karpy.scheduling import SchedulerOptions

SPOT_TO_SPOT = Settings(feature_gates=FeatureGates(spot_to_spot_consolidation=True))
LABELS = {"app": "test"}


def two_cheapest(grace: str | None = None) -> Scene:
    """Context("Delete")'s BeforeEach: two consolidatable nodes of the cheapest
    on-demand type, 32 CPUs allocatable."""
    scene = karpenter_scene()
    for name in ("node-0", "node-1"):
        machine(scene, name, LEAST_EXPENSIVE, cpu="32", memory="32Gi", grace=grace)
    return scene


async def test_does_not_consolidate_pdb_blocked_pods_with_a_termination_grace_period() -> None:
    """consolidation_test.go Context("Delete") It("does not consolidate nodes with pods
    with blocking PDBs when the NodePool's TerminationGracePeriod is not nil"):
    consolidation is graceful, the grace period changes nothing."""
    scene = two_cheapest(grace="300s")
    for i, node in enumerate(("node-0", "node-0", "node-1")):
        scene.pod(f"pod-{i}", node, cpu="10m", memory="10Mi", labels=LABELS)
    scene.pdbs.append({"metadata": {"name": "pdb", "namespace": "default"},
                       "spec": {"selector": {"matchLabels": LABELS}, "maxUnavailable": 0},
                       "status": {"disruptionsAllowed": 0}})
    assert await decide(scene, SPOT_TO_SPOT) == []


async def test_can_delete_nodes_evicts_pods_without_an_owner_ref() -> None:
    """consolidation_test.go Context("Delete") It("can delete nodes, evicts pods without
    an ownerRef"): the node with the fewest pods goes although its pod is stand-alone."""
    scene = two_cheapest()
    scene.pod("pod-0", "node-0", cpu="10m", memory="10Mi", labels=LABELS)
    scene.pod("pod-1", "node-0", cpu="10m", memory="10Mi", labels=LABELS)
    scene.pod("pod-2", "node-1", cpu="10m", memory="10Mi", labels=LABELS, owner_kind=None)
    assert names(await decide(scene, SPOT_TO_SPOT)) == [
        ("Underutilized", "delete", ["node-1"], 0)]


async def test_should_not_consolidate_by_relaxing_min_values_when_best_effort() -> None:
    """consolidation_test.go It("should not consolidate a node by relaxing min values
    when policy is set to BestEffort"): two types for minValues 3; the provisioner may
    launch short of minValues, consolidation may not."""
    types = [it for it in karpenter_scene().types if it.name in (LEAST_EXPENSIVE, MOST_EXPENSIVE)]
    scene = karpenter_scene(types=types, requirements=[
        {"key": "node.kubernetes.io/instance-type", "operator": "In",
         "values": [it.name for it in types], "minValues": 3}])
    machine(scene, "node", MOST_EXPENSIVE, cpu="5", memory="32Gi")
    scene.pod("pod", "node", cpu="10m", memory="10Mi")
    controller = SceneController(scene, SPOT_TO_SPOT,
                                 SchedulerOptions(min_values_policy="BestEffort"))
    for method in controller.methods:
        assert await controller.run(method) == []
    assert controller.messages("Unconsolidatable") == [
        "Filtering by price: minValues requirement is not met for label(s) "
        "(label(s)=[node.kubernetes.io/instance-type])"]


def test_should_allow_pods_on_deleting_nodes_to_reschedule() -> None:
    """suite_test.go It("should allow pods on deleting nodes to reschedule to
    uninitialized nodes"): ten 3-CPU nodes, nine marked for deletion; simulating the
    removal of the tenth, its 2-CPU pod still finds a place (a new node)."""
    scene = karpenter_scene(consolidate_after="Never")
    for i in range(10):
        machine(scene, f"node-{i}", MOST_EXPENSIVE, cpu="3", memory="32Gi")
    scene.pod("pod", "node-0", cpu="2", memory="100Mi")
    scene.cluster.mark_for_deletion(*(f"test:///node-{i}" for i in range(1, 10)))
    state = scene.cluster.node_by_name("node-0")
    assert state is not None
    built = build_candidate(state, scene.snapshot(), GRACEFUL)
    assert isinstance(built, Candidate), built
    simulation = scene.whatif().simulate([built])
    assert simulation.all_scheduled, simulation.errors
    assert len(simulation.new_nodeclaims) == 1
