"""minValues with groups of identical pods: packing backs off until minValues holds.

A NodePool that asks for at least two instance types (or two values of a numeric
label) must still launch pods that fit any type alone but fit two together only on the
largest: each NodeClaim takes fewer pods and keeps enough types, as Karpenter does.
"""

from __future__ import annotations

from scheduling_support import INSTANCE_TYPE, expr, itype, nodepool, pods

from karpy.scheduling import InstanceType, Results, SchedulerOptions
from karpy.scheduling.simulator import Simulator

CPU_LABEL = "example.com/instance-cpu"


def _types() -> list[InstanceType]:
    # Two 1900m pods (3800m) fit together only on "large".
    return [
        itype(name, cpu, 8, labels={CPU_LABEL: str(cpu)})
        for name, cpu in (("small", 2), ("medium", 3), ("large", 4))
    ]


def _check_each_claim_keeps_two_values(results: Results, key: str) -> None:
    assert not results.errors, [str(e) for e in results.errors]
    assert results.scheduled_pods == 4
    for claim in results.new_nodeclaims:
        values = set()
        for instance_type in claim.instance_types:
            values |= set(instance_type.requirements[key].values)
        assert len(values) >= 2, claim
        # the requirement keeps its minValues on the NodeClaim
        assert claim.requirements[key].min_values == 2 or key != INSTANCE_TYPE


def test_instance_type_min_values_with_identical_pods() -> None:
    pool = nodepool(
        types=_types(), requirements=[{**expr(INSTANCE_TYPE, "Exists"), "minValues": 2}]
    )
    results = Simulator([pool]).solve(pods(4, cpu="1900m", memory="1Gi"))
    _check_each_claim_keeps_two_values(results, INSTANCE_TYPE)
    # three types fit one pod; two pods would leave only "large"
    assert [len(c.pods) for c in results.new_nodeclaims] == [1, 1, 1, 1]


def test_gt_requirement_with_min_values_and_identical_pods() -> None:
    pool = nodepool(types=_types(), requirements=[{**expr(CPU_LABEL, "Gt", "1"), "minValues": 2}])
    results = Simulator([pool]).solve(pods(4, cpu="1900m", memory="1Gi"))
    _check_each_claim_keeps_two_values(results, CPU_LABEL)


def test_back_off_keeps_as_many_pods_as_min_values_allow() -> None:
    """Small pods: three fit on "medium" and "large" (two values), four only on
    "large"; so claims take three, not one and not four."""
    pool = nodepool(
        types=_types(), requirements=[{**expr(INSTANCE_TYPE, "Exists"), "minValues": 2}]
    )
    results = Simulator([pool]).solve(pods(6, cpu="950m", memory="1Gi"))
    assert not results.errors
    assert [len(c.pods) for c in results.new_nodeclaims] == [3, 3]
    for claim in results.new_nodeclaims:
        assert claim.instance_type_names == ["medium", "large"]


def test_best_effort_still_packs_tightly() -> None:
    """With minValuesPolicy BestEffort the pods pack as they would without minValues."""
    pool = nodepool(
        types=_types(), requirements=[{**expr(INSTANCE_TYPE, "Exists"), "minValues": 2}]
    )
    options = SchedulerOptions(min_values_policy="BestEffort")
    results = Simulator([pool], options=options).solve(pods(4, cpu="1900m", memory="1Gi"))
    assert not results.errors
    assert [len(c.pods) for c in results.new_nodeclaims] == [2, 2]


def test_gte_and_lte_on_a_nodepool_select_the_types_within_the_bounds() -> None:
    """Karpenter v1.9's Gte/Lte: both bounds inclusive."""
    types = [
        itype(name, cpu, 8, labels={CPU_LABEL: str(cpu)})
        for name, cpu in (("c2", 2), ("c3", 3), ("c4", 4), ("c5", 5))
    ]
    pool = nodepool(types=types, requirements=[expr(CPU_LABEL, "Gte", "3"),
                                               expr(CPU_LABEL, "Lte", "4")])
    results = Simulator([pool]).solve(pods(1, cpu="500m", memory="1Gi"))
    assert not results.errors
    [claim] = results.new_nodeclaims
    assert sorted(claim.instance_type_names) == ["c3", "c4"]
    assert {(r["operator"], r["values"][0]) for r in claim.node_selector_requirements()
            if r["key"] == CPU_LABEL} == {("Gt", "2"), ("Lt", "5")}


def test_best_effort_lowers_min_values_to_what_the_types_span() -> None:
    pool = nodepool(
        types=_types(), requirements=[{**expr(INSTANCE_TYPE, "Exists"), "minValues": 3}]
    )
    big = pods(1, cpu="2500m", memory="1Gi")  # fits "medium" and "large" only
    strict = Simulator([pool]).solve(big)
    assert strict.errors and not strict.new_nodeclaims
    options = SchedulerOptions(min_values_policy="BestEffort")
    [claim] = Simulator([pool], options=options).solve(big).new_nodeclaims
    assert claim.min_values_relaxed
    assert claim.requirements[INSTANCE_TYPE].min_values == 2
    relaxed = Simulator([pool], options=options).solve(pods(1, cpu="500m", memory="1Gi"))
    assert not relaxed.new_nodeclaims[0].min_values_relaxed


def test_min_values_counts_only_the_values_the_requirement_allows() -> None:
    """Karpenter v1.15.0 (and v1.14.3) cloudprovider/types.go SatisfiesMinValues: a
    type's values that the NodeClaim's requirements exclude do not count. Every type
    offers two zones, but a pod pinned to one zone narrows the claim to that zone: a
    zone minValues of 2 cannot hold, so Strict launches nothing for it."""
    zone = "topology.kubernetes.io/zone"
    pool = nodepool(types=_types(), requirements=[{**expr(zone, "Exists"), "minValues": 2}])
    spread_out = Simulator([pool]).solve(pods(1, cpu="1", memory="1Gi"))
    assert spread_out.scheduled_pods == 1 and not spread_out.errors
    pinned = Simulator([pool]).solve(
        pods(1, cpu="1", memory="1Gi", node_selector={zone: "zone-a"})
    )
    assert pinned.scheduled_pods == 0 and not pinned.new_nodeclaims
    assert any("minValues" in str(e) for e in pinned.errors), [str(e) for e in pinned.errors]
