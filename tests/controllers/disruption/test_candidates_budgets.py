"""Why a node is not a candidate (one function, Karpenter's words), PodDisruptionBudget
limits, and how budgets count."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from disruption_support import Scene

from karpy.controllers.disruption import Candidate, PdbLimits, build_candidate, disruption_budgets
from karpy.controllers.disruption._candidates import EVENTUAL, GRACEFUL
from karpy.runtime import freeze


def verdict(scene: Scene, node: str, cls: str = GRACEFUL) -> Candidate | list[str]:
    state = scene.cluster.node_by_name(node)
    assert state is not None
    return build_candidate(state, scene.snapshot(), cls)  # type: ignore[arg-type]


def test_do_not_disrupt_pod_and_node_annotations_block_with_karpenters_words() -> None:
    scene = Scene()
    scene.pool()
    scene.machine("a", "m-4x")
    scene.pod("keep", "a", annotations={"karpenter.sh/do-not-disrupt": "true"})
    assert verdict(scene, "a") == [
        'pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/keep)'
    ]
    scene.machine("b", "m-4x", node_annotations={"karpenter.sh/do-not-disrupt": "true"})
    assert verdict(scene, "b") == [
        'disruption is blocked through the "karpenter.sh/do-not-disrupt" annotation'
    ]


def test_a_pod_with_resource_claims_blocks_until_what_ifs_carry_devices() -> None:
    """karpy's (issue 40): disruption's what-if solves do not move allocated devices,
    so a node whose pod has ResourceClaims is not a candidate, and says why."""
    from karpy.apis.pods import has_dra_requirements
    from karpy.runtime import thaw

    scene = Scene()
    scene.pool()
    scene.machine("a", "m-4x")
    obj = thaw(scene.pod("gpu", "a"))
    obj["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    assert has_dra_requirements(obj)
    scene.cluster.update_pod(freeze(obj))
    scene.pods["a"][-1] = obj
    assert verdict(scene, "a") == [
        "pod has Dynamic Resource Allocation claims, which disruption does not simulate "
        "yet (Pod=default/gpu)"
    ]
    scene.machine("b", "m-4x")
    scene.pod("plain", "b")
    assert isinstance(verdict(scene, "b"), Candidate)


def test_a_pdb_allowing_no_eviction_blocks_and_two_pdbs_block_too() -> None:
    scene = Scene()
    scene.pool()
    scene.machine("a", "m-4x")
    scene.pod("web-1", "a", labels={"app": "web"})
    zero = {"metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 0},
            "status": {"disruptionsAllowed": 0}}
    scene.pdbs.append(zero)
    assert verdict(scene, "a") == ["pdb prevents pod evictions (PodDisruptionBudget=[default/web])"]
    scene.pdbs[0] = {**zero, "status": {"disruptionsAllowed": 1}}
    assert isinstance(verdict(scene, "a"), Candidate)
    scene.pdbs.append({**zero, "metadata": {"name": "web2", "namespace": "default"},
                       "status": {"disruptionsAllowed": 5}})
    assert verdict(scene, "a") == [
        "eviction does not support multiple PDBs "
        "(PodDisruptionBudget(s)=[default/web, default/web2])"
    ]


def test_drift_with_a_termination_grace_period_is_not_blocked_by_pods() -> None:
    scene = Scene()
    scene.pool()
    scene.machine("a", "m-4x", drifted=True, grace="1h")
    scene.pod("keep", "a", annotations={"karpenter.sh/do-not-disrupt": "true"})
    assert isinstance(verdict(scene, "a", EVENTUAL), Candidate)
    assert isinstance(verdict(scene, "a", GRACEFUL), list)
    scene.machine("b", "m-4x", drifted=True)
    scene.pod("keep2", "b", annotations={"karpenter.sh/do-not-disrupt": "true"})
    assert isinstance(verdict(scene, "b", EVENTUAL), list)


def test_queued_nominated_and_unknown_pool_nodes_are_not_candidates() -> None:
    scene = Scene()
    scene.pool()
    scene.machine("a", "m-4x")
    state = scene.cluster.node_by_name("a")
    assert state is not None
    assert build_candidate(state, scene.snapshot(queued=[state.provider_id]), GRACEFUL) == []
    scene.cluster.nominate_node(state.provider_id)
    assert verdict(scene, "a") == ["node is nominated for a pending pod"]
    scene.machine("b", "m-4x", pool="gone")
    assert verdict(scene, "b") == ["NodePool not found (NodePool=gone)"]


def test_pdb_limits_fully_blocking_and_unhealthy_pods() -> None:
    pdb = {"metadata": {"name": "p", "namespace": "ns"},
           "spec": {"selector": {"matchLabels": {"a": "b"}}, "minAvailable": "100%",
                    "unhealthyPodEvictionPolicy": "AlwaysAllow"},
           "status": {"disruptionsAllowed": 0}}
    limits = PdbLimits([pdb, {"metadata": {"name": "null", "namespace": "ns"},
                              "spec": {"selector": None}}])
    healthy = {"metadata": {"namespace": "ns", "labels": {"a": "b"}}, "status": {}}
    unready = {"metadata": {"namespace": "ns", "labels": {"a": "b"}},
               "status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    other_ns = {"metadata": {"namespace": "other", "labels": {"a": "b"}}}
    assert limits.blocking(healthy) == ["ns/p"]
    assert limits.blocking(healthy, fully=True) == ["ns/p"]
    assert limits.blocking(unready) == []
    assert limits.blocking(other_ns) == []


def test_budgets_round_up_count_disrupting_nodes_and_follow_cron_windows() -> None:
    scene = Scene()
    scene.pool(budgets=[{"nodes": "30%"},
                        {"nodes": "0", "reasons": ["Underutilized"],
                         "schedule": "0 9 * * *", "duration": "8h"}])
    for i in range(5):
        scene.machine(f"n{i}", "m-4x")
    inside = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    outside = datetime(2026, 11, 23, 20, 0, tzinfo=UTC)
    nodes = scene.cluster.nodes()
    pools = scene.cluster.nodepools()
    # 30 % of 5 nodes rounds up to 2.
    assert disruption_budgets(pools, nodes, "Drifted", inside).left("default") == 2
    # The cron window (09:00-17:00 UTC) allows no Underutilized disruption...
    budgets = disruption_budgets(pools, nodes, "Underutilized", inside)
    assert budgets.left("default") == 0
    assert budgets.blocked() == ["default"]
    # ...outside it, the 30 % budget applies.
    assert disruption_budgets(pools, nodes, "Underutilized", outside).left("default") == 2
    # A node already going away uses the allowance up.
    scene.cluster.mark_for_deletion(nodes[0].provider_id)
    budgets = disruption_budgets(pools, scene.cluster.nodes(), "Drifted", inside)
    assert budgets.left("default") == 1
    assert budgets.take("default") and not budgets.take("default")


def test_a_not_ready_node_consumes_budget() -> None:
    scene = Scene()
    scene.pool(budgets=[{"nodes": "1"}])
    scene.machine("a", "m-4x")
    scene.machine("b", "m-4x")
    state = scene.cluster.node_by_name("b")
    assert state is not None and state.node is not None
    node = dict(state.node)
    node["status"] = {**node["status"], "conditions": [{"type": "Ready", "status": "False"}]}
    scene.cluster.update_node(freeze(node))
    budgets = disruption_budgets(scene.cluster.nodepools(), scene.cluster.nodes(), "Empty",
                                 datetime(2026, 1, 1, tzinfo=UTC))
    assert budgets.left("default") == 0


def test_a_budget_duration_go_cannot_hold_fails_closed_for_its_own_nodepool_only() -> None:
    # "99999999h" passes the CRD pattern; it once raised OverflowError out of the budget
    # computation and stopped disruption for every NodePool.
    scene = Scene()
    scene.pool(budgets=[{"nodes": "100%"}])
    scene.pool("broken", budgets=[{"nodes": "100%", "schedule": "@daily",
                                   "duration": "99999999h"}])
    for pool in ("default", "broken"):
        scene.machine(f"{pool}-a", "m-4x", pool=pool)
        scene.machine(f"{pool}-b", "m-4x", pool=pool)
    budgets = disruption_budgets(scene.cluster.nodepools(), scene.cluster.nodes(), "Empty",
                                 datetime(2026, 1, 1, tzinfo=UTC))
    assert budgets.left("default") == 2
    assert budgets.left("broken") == 0
    (broken,) = [e for e in scene.cluster.nodepools() if e.name == "broken"]
    assert broken.model is None
    assert broken.error is not None and "99999999h" in broken.error


def test_a_pod_that_will_surge_does_not_keep_its_node_through_its_pdb() -> None:
    # karpy.dev/surge-before-evict: the Deployment replaces the pod, no eviction is asked.
    scene = Scene()
    scene.pool()
    scene.machine("a", "m-4x")
    scene.pod("web-1", "a", labels={"app": "web"})
    scene.pdbs.append({"metadata": {"name": "web", "namespace": "default"},
                       "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 0},
                       "status": {"disruptionsAllowed": 0}})
    state = scene.cluster.node_by_name("a")
    assert state is not None
    snapshot = dataclasses.replace(scene.snapshot(), surging=frozenset({"default/web-1"}))
    candidate = build_candidate(state, snapshot, GRACEFUL)  # type: ignore[arg-type]
    assert isinstance(candidate, Candidate)
    assert not candidate.staying
    assert verdict(scene, "a") == ["pdb prevents pod evictions (PodDisruptionBudget=[default/web])"]
