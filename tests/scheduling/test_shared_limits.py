"""ClusterLimits in the simulator: NodePools that share a limit plan within what it
leaves, together, as a NodePool plans within its own limits."""

from __future__ import annotations

from scheduling_support import HOSTNAME, nodepool, pods, term

from karpy.scheduling import SharedLimit
from karpy.scheduling.resources import parse_resource_list
from karpy.scheduling.simulator import Simulator


def _limit(name: str, usage: dict[str, str] | None = None, **limits: str) -> SharedLimit:
    return SharedLimit(name, parse_resource_list(limits),
                       parse_resource_list(usage or {}))


def _planned_cpu(results: object, pools: set[str]) -> int:
    """The most CPU the planned NodeClaims of ``pools`` could take (their largest type)."""
    total = 0
    for claim in results.new_nodeclaims:  # type: ignore[attr-defined]
        if claim.nodepool in pools:
            total += max(it.capacity["cpu"] for it in claim.instance_types)
    return total


def test_two_pools_under_one_limit_plan_within_it_together() -> None:
    team = _limit("team", cpu="12")
    # Pod anti-affinity spreads the pods one per node; each pool alone could take them all.
    spread = pods(6, "web", cpu="1500m", anti_affinity=[term(HOSTNAME, {"app": "web"})],
                  labels={"app": "web"})
    heavy = nodepool("heavy", weight=10, shared_limits=[team])
    light = nodepool("light", shared_limits=[team])
    results = Simulator([heavy, light]).solve(spread)
    planned = _planned_cpu(results, {"heavy", "light"})
    assert planned <= 12_000, f"planned {planned}m CPU past the ClusterLimit of 12"
    assert len(results.new_nodeclaims) + len(results.errors) == 6  # one pod per node
    assert results.errors, "every pod was placed: the limit was not honoured"
    assert all("ClusterLimit team" in e.reason for e in results.errors), [
        e.reason for e in results.errors]


def test_usage_of_the_covered_pools_counts_against_the_limit() -> None:
    team = _limit("team", {"cpu": "10"}, cpu="12")
    results = Simulator([nodepool("a", shared_limits=[team])]).solve(pods(2, "p", cpu="1500m"))
    # 2 CPU are left: only the 2-CPU type fits, and it holds one 1.5-CPU pod
    assert [max(it.capacity["cpu"] for it in c.instance_types)
            for c in results.new_nodeclaims] == [2000]
    assert len(results.errors) == 1
    assert "ClusterLimit team" in results.errors[0].reason


def test_a_node_limit_counts_the_nodeclaims_of_every_covered_pool() -> None:
    fleet = _limit("fleet", {"nodes": "1"}, nodes="3")
    solo = pods(4, "solo", anti_affinity=[term(HOSTNAME, {"app": "solo"})],
                labels={"app": "solo"})
    results = Simulator([
        nodepool("a", weight=5, shared_limits=[fleet]), nodepool("b", shared_limits=[fleet]),
    ]).solve(solo)
    assert len(results.new_nodeclaims) == 2
    assert len(results.errors) == 2
    assert "node limit reached (ClusterLimit fleet limits.nodes)" in results.errors[0].reason


def test_a_pool_the_limit_does_not_cover_is_not_held_back() -> None:
    team = _limit("team", {"cpu": "12"}, cpu="12")
    results = Simulator([
        nodepool("capped", weight=10, shared_limits=[team]), nodepool("free"),
    ]).solve(pods(3, "p", cpu="1"))
    assert not results.errors
    assert {c.nodepool for c in results.new_nodeclaims} == {"free"}


def test_the_pools_own_limit_and_the_shared_one_both_hold() -> None:
    team = _limit("team", cpu="100")
    own = nodepool("a", limits={"cpu": "10"}, shared_limits=[team])
    results = Simulator([own]).solve(pods(3, "big", cpu="3"))
    assert _planned_cpu(results, {"a"}) <= 10_000
    assert "the NodePool's and its ClusterLimits' limits" in results.errors[0].reason
    # and the shared one binds when it is the smaller
    tight = nodepool("a", limits={"cpu": "100"}, shared_limits=[_limit("team", cpu="10")])
    results = Simulator([tight]).solve(pods(3, "big", cpu="3"))
    assert _planned_cpu(results, {"a"}) <= 10_000
    assert len(results.errors) == 1
