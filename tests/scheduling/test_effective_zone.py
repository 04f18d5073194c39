"""The zone each pending pod of a solve is held to (Karpenter's
karpenter_scheduler_pending_pods_by_effective_zone_count): its nodeSelector, its
volumes and its zone-keyed topology rules intersected, as the cluster stood when the
solve started."""

from __future__ import annotations

from scheduling_support import ZONE, expr, node, nodepool, pod, pod_dict, term

from karpy.scheduling import Pod, Requirements
from karpy.scheduling.requirements import Requirement
from karpy.scheduling.simulator import Simulator


def by_zone(*pending: Pod, nodes: tuple[object, ...] = ()) -> dict[str, int]:
    results = Simulator([nodepool()]).solve(list(pending), nodes=list(nodes))  # type: ignore[arg-type]
    return dict(results.pending_by_zone)


def in_zone(*zones: str) -> Requirements:
    return Requirements([Requirement.new(ZONE, "In", zones)])


def test_a_pod_without_zone_signals_is_flexible_and_a_pinned_one_counts_in_its_zone() -> None:
    assert by_zone(pod("free"), pod("pinned", node_selector={ZONE: "zone-b"}),
                   pod("two", required_terms=[[expr(ZONE, "In", "zone-a", "zone-c")]])) == {
        "flexible": 2, "zone-b": 1}


def test_volumes_narrow_the_zone_and_a_contradiction_is_none() -> None:
    stuck = Pod.from_dict(pod_dict("stuck", node_selector={ZONE: "zone-b"}),
                          volume_requirements=[in_zone("zone-a")])
    held = Pod.from_dict(pod_dict("held"), volume_requirements=[in_zone("zone-c")])
    assert by_zone(stuck, held) == {"none": 1, "zone-c": 1}


def test_zone_anti_affinity_leaves_the_zone_without_a_matching_pod() -> None:
    """Replicas that keep one per zone, two zones taken: the third is the only one."""
    rule = term(ZONE, {"app": "db"})
    running = [pod(f"db-{z}", labels={"app": "db"}, anti_affinity=[rule], node_name=f"n-{z}")
               for z in ("a", "b")]
    nodes = (node("n-a", zone="zone-a", bound=[running[0]]),
             node("n-b", zone="zone-b", bound=[running[1]]))
    newcomer = pod("db-new", labels={"app": "db"}, anti_affinity=[rule])
    assert by_zone(newcomer, nodes=nodes) == {"zone-c": 1}


def test_bound_pods_moving_off_a_node_are_not_pending() -> None:
    assert by_zone(pod("moving", node_name="old-node"), pod("new")) == {"flexible": 1}
