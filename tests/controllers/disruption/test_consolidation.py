"""Consolidation decisions on small scenes: what karpy deletes, replaces or splits,
and the reasons it gives when it does neither."""

from __future__ import annotations

import pytest
from disruption_support import Scene, instance_type

from karpy.controllers.disruption import Candidate, Command, Decision, build_candidate, consolidate
from karpy.controllers.disruption._candidates import GRACEFUL
from karpy.controllers.disruption._whatif import MIN_SPOT_TO_SPOT_TYPES


def candidate(scene: Scene, node: str) -> Candidate:
    state = scene.cluster.node_by_name(node)
    assert state is not None
    built = build_candidate(state, scene.snapshot(), GRACEFUL)
    assert isinstance(built, Candidate), built
    return built


def test_a_node_whose_pods_fit_elsewhere_is_deleted() -> None:
    scene = Scene()
    scene.pool()
    scene.machine("big", "m-8x")
    scene.machine("small", "m-4x")
    scene.pod("a", "big", cpu="2")
    scene.pod("b", "small", cpu="1")
    outcome = consolidate(scene.whatif(), [candidate(scene, "small")])
    assert isinstance(outcome, Command)
    assert outcome.decision is Decision.DELETE
    assert outcome.estimated_savings == 0.2  # the m-4x's price, nothing new bought
    assert outcome.results is not None
    assert outcome.results.placements() == {"default/b": "big"}


def test_an_oversized_node_is_replaced_by_the_cheaper_types_that_fit() -> None:
    scene = Scene()
    scene.pool()
    scene.machine("huge", "m-32x")
    scene.pod("a", "huge", cpu="1")
    scene.pod("b", "huge", cpu="1")
    outcome = consolidate(scene.whatif(), [candidate(scene, "huge")])
    assert isinstance(outcome, Command)
    assert outcome.decision is Decision.REPLACE
    [replacement] = outcome.replacements
    # Every type it may launch is cheaper than the m-32x ($1.60/h) and fits both pods.
    assert replacement.instance_type_names == ["m-2x", "m-4x", "m-8x", "m-16x"]
    assert outcome.estimated_savings == 1.6 - 0.1


def test_no_cheaper_option_says_so() -> None:
    scene = Scene()
    scene.pool()
    scene.machine("tight", "m-2x")
    scene.pod("a", "tight", cpu="1500m")
    outcome = consolidate(scene.whatif(), [candidate(scene, "tight")])
    assert outcome == "Can't replace with a cheaper node"


def test_pods_that_fit_nowhere_keep_the_node() -> None:
    scene = Scene(types=[instance_type("only-4x", 4, 16, price=0.2)])
    scene.pool()
    scene.machine("n", "only-4x")
    scene.pod("a", "n", cpu="3500m")
    scene.pod("b", "n", cpu="100m", node_selector={"disk": "ssd"})
    outcome = consolidate(scene.whatif(), [candidate(scene, "n")])
    assert isinstance(outcome, str)
    assert "default/b" in outcome


def test_spot_to_spot_needs_the_feature_gate_and_fifteen_cheaper_types() -> None:
    scene = Scene(types=[instance_type(f"s-{i}", 4 + i, 32, price=1.0, spot_price=0.1 + i / 100)
                         for i in range(20)])
    scene.pool()
    scene.machine("spot", "s-19", capacity_type="spot")
    scene.pod("a", "spot", cpu="1")
    whatif = scene.whatif()
    victim = candidate(scene, "spot")
    assert consolidate(whatif, [victim]) == (
        "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"
    )
    outcome = consolidate(whatif, [victim], spot_to_spot=True)
    assert isinstance(outcome, Command)
    [replacement] = outcome.replacements
    assert len(replacement.instance_type_names) == MIN_SPOT_TO_SPOT_TYPES
    assert replacement.requirements["karpenter.sh/capacity-type"].values == {"spot"}

    scene = Scene(types=[instance_type(f"s-{i}", 4 + i, 32, price=1.0, spot_price=0.1 + i / 100)
                         for i in range(10)])
    scene.pool()
    scene.machine("spot", "s-9", capacity_type="spot")
    scene.pod("a", "spot", cpu="1")
    assert consolidate(scene.whatif(), [candidate(scene, "spot")], spot_to_spot=True) == (
        f"SpotToSpotConsolidation requires {MIN_SPOT_TO_SPOT_TYPES} cheaper instance type "
        "options than the current candidate to consolidate, got 9"
    )


def test_split_replaces_one_node_by_two_cheaper_ones() -> None:
    # Two pods that must not share a node sit on an m-32x only because they were placed
    # there before the anti-affinity mattered. Karpenter would need two new nodes and
    # gives up; karpy splits the node into two m-2x ($0.20/h) instead of $1.60/h.
    scene = Scene()
    scene.pool()
    scene.machine("huge", "m-32x")
    scene.machine("other", "m-1x")
    scene.pod("filler", "other", cpu="900m")
    spread = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "spread"}},
         "topologyKey": "kubernetes.io/hostname"}]}}
    # The pair shares a node (it landed there before the rule was added); any new
    # placement must respect it.
    scene.pod("a", "huge", cpu="1", labels={"app": "spread"}, affinity=spread)
    scene.pod("b", "huge", cpu="1", labels={"app": "spread"}, affinity=spread)
    victim = candidate(scene, "huge")
    outcome = consolidate(scene.whatif(), [victim], split=False)
    assert outcome == "Can't remove without creating 2 candidates"
    outcome = consolidate(scene.whatif(), [victim], split=True)
    assert isinstance(outcome, Command), outcome
    assert outcome.decision is Decision.REPLACE
    assert len(outcome.replacements) == 2
    assert outcome.replacement_price < victim.price
    for plan in outcome.replacements:
        assert len(plan.pods) == 1
        # Whatever type each launches, the two together stay cheaper than the node.
        assert max(it.cheapest_price(plan.requirements) or 0 for it in plan.instance_types) \
            < victim.price - min(p.price for p in outcome.replacements)


def test_multi_node_candidates_fold_into_one_cheaper_node() -> None:
    scene = Scene()
    scene.pool()
    for i in range(3):
        scene.machine(f"n{i}", "m-4x")
        scene.pod(f"p{i}", f"n{i}", cpu="1")
    victims = [candidate(scene, f"n{i}") for i in range(3)]
    outcome = consolidate(scene.whatif(), victims, split=False, consolidation_type="multi")
    assert isinstance(outcome, Command)
    assert outcome.decision is Decision.REPLACE
    [replacement] = outcome.replacements
    assert replacement.price < sum(v.price for v in victims)
    assert {p.key for p in replacement.pods} == {"default/p0", "default/p1", "default/p2"}


def _cluster_limit(scene: Scene, cpu: str) -> None:
    scene.cluster.cluster_limits.update({
        "apiVersion": "karpy.dev/v1alpha1", "kind": "ClusterLimit",
        "metadata": {"name": "fleet", "generation": 1}, "spec": {"limits": {"cpu": cpu}}})


@pytest.mark.parametrize(("limit", "replaced_by"), [
    ("36", ["m-2x", "m-4x"]),   # 32 of 36 CPU used: a replacement of at most 4
    ("33", None),               # 1 CPU left: no type that holds the pods
])
def test_a_replacement_fits_in_what_a_clusterlimit_leaves(
    limit: str, replaced_by: list[str] | None,
) -> None:
    # The candidate still counts while its replacement is planned, as with a NodePool's
    # own limits.
    scene = Scene()
    scene.pool()
    _cluster_limit(scene, limit)
    scene.machine("huge", "m-32x")
    scene.pod("a", "huge", cpu="1")
    scene.pod("b", "huge", cpu="1")
    outcome = consolidate(scene.whatif(), [candidate(scene, "huge")])
    if replaced_by is None:
        assert isinstance(outcome, str), outcome
        assert "exceed the limits of ClusterLimit fleet" in outcome
        return
    assert isinstance(outcome, Command)
    assert outcome.decision is Decision.REPLACE
    [replacement] = outcome.replacements
    assert replacement.instance_type_names == replaced_by
