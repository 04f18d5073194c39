"""Karpenter's static-NodePool disruption cases, ported: staticdrift_test.go, and the
Context("Static NodePool") of emptiness_test.go, consolidation_test.go and
drift_test.go. Each test names the ``It(...)`` it comes from and decides with the real
disruption methods over Karpenter's fake catalogue (see ``ksuite``)."""

from __future__ import annotations

from typing import Any

from ksuite import (
    MOST_EXPENSIVE,
    Scene,
    SceneController,
    decide,
    machine,
)
from upstream_fake import instance_types_assorted

from karpy.controllers.disruption._drift import Drift
from karpy.controllers.disruption._emptiness import Emptiness
from karpy.controllers.disruption._multinode import MultiNodeConsolidation
from karpy.controllers.disruption._singlenode import SingleNodeConsolidation
from karpy.runtime import freeze

ALLOWED = "karpenter_nodepools_allowed_disruptions"


def no_pool() -> Scene:
    """A scene over Karpenter's fake catalogue without the suite's dynamic NodePool."""
    return Scene(types=instance_types_assorted())


def static_pool(scene: Scene, name: str, replicas: int, *,
                budgets: list[dict[str, Any]] | None = None,
                limit_nodes: int | None = None) -> None:
    """test.StaticNodePool: ``replicas`` set, budgets as given (100 % by default)."""
    pool = scene.pool(name, budgets=budgets or [{"nodes": "100%"}])
    pool["spec"]["replicas"] = replicas
    if limit_nodes is not None:
        pool["spec"]["limits"] = {"nodes": str(limit_nodes)}
    scene.cluster.update_nodepool(freeze(pool))


def static_nodes(scene: Scene, pool: str, count: int, *, drifted: bool = True,
                 **kwargs: Any) -> None:
    """``count`` nodes of the most expensive type, 32 CPUs, 100 pods allocatable."""
    for i in range(count):
        machine(scene, f"{pool}-{i}", MOST_EXPENSIVE, pool=pool, cpu="32", memory="32Gi",
                drifted=drifted, **kwargs)


def scene_of(pools: dict[str, tuple[int, int]], **pool: Any) -> Scene:
    """One static pool per entry, name -> (replicas, drifted nodes)."""
    scene = no_pool()
    for name, (replicas, nodes) in pools.items():
        static_pool(scene, name, replicas, **pool)
        static_nodes(scene, name, nodes)
    return scene


def drifted(commands: list[Any]) -> dict[str, int]:
    """Static-drift commands per NodePool (each replaces one node by one)."""
    out: dict[str, int] = {}
    for c in commands:
        assert (c.reason, str(c.decision), len(c.candidates), len(c.replacements)) == (
            "Drifted", "replace", 1, 1)
        out[c.candidates[0].nodepool] = out.get(c.candidates[0].nodepool, 0) + 1
    return out


# -- staticdrift_test.go Context("Budgets") ---------------------------------------------


async def test_should_respect_disruption_budgets_nodes_count_for_static_drift() -> None:
    """staticdrift_test.go Context("Budgets") It("should respect disruption budgets
    (Nodes Count) for static drift")"""
    scene = scene_of({"static": (5, 5)},
                     budgets=[{"nodes": "2", "reasons": ["Drifted"]}])
    controller = SceneController(scene)
    commands = await controller.run(controller.methods[1])
    assert drifted(commands) == {"static": 2}
    assert controller.metric(ALLOWED, nodepool="static", reason="Drifted") == 2


async def test_should_respect_disruption_budgets_nodes_percentage_for_static_drift() -> None:
    """staticdrift_test.go Context("Budgets") It("should respect disruption budgets
    (Nodes Percentage) for static drift")"""
    scene = scene_of({"static": (5, 5)},
                     budgets=[{"nodes": "20%", "reasons": ["Drifted"]}])
    controller = SceneController(scene)
    commands = await controller.run(controller.methods[1])
    assert drifted(commands) == {"static": 1}
    assert controller.metric(ALLOWED, nodepool="static", reason="Drifted") == 1


async def test_should_respect_budgets_for_multiple_static_nodepools() -> None:
    """staticdrift_test.go Context("Budgets") It("should respect budgets for multiple
    static nodepools"): 1, 2 and 100 % of two drifted nodes each."""
    scene = no_pool()
    for name, replicas, nodes in (("static-nodepool-1", 4, "1"), ("static-nodepool-2", 3, "2"),
                                  ("static-nodepool-3", 2, "100%")):
        static_pool(scene, name, replicas, budgets=[{"nodes": nodes, "reasons": ["Drifted"]}])
        static_nodes(scene, name, 2)
    controller = SceneController(scene)
    assert drifted(await decide(scene)) == {
        "static-nodepool-1": 1, "static-nodepool-2": 2, "static-nodepool-3": 2,
    }
    await controller.run(controller.methods[1])
    for name, allowed in (("static-nodepool-1", 1), ("static-nodepool-2", 2),
                          ("static-nodepool-3", 2)):
        assert controller.metric(ALLOWED, nodepool=name, reason="Drifted") == allowed


# -- staticdrift_test.go Context("Limits and Scaling") ----------------------------------


async def test_should_not_drift_nodes_when_we_cannot_acquire_limits() -> None:
    """staticdrift_test.go Context("Limits and Scaling") It("should not drift nodes when
    we cannot acquire limits"): five of five nodes, limits.nodes 5."""
    assert await decide(scene_of({"static": (5, 5)}, limit_nodes=5)) == []


async def test_should_drift_nodes_when_we_can_acquire_limits() -> None:
    """staticdrift_test.go Context("Limits and Scaling") It("should drift nodes when we
    can acquire limits"): two nodes (five wanted), limits.nodes 5."""
    assert drifted(await decide(scene_of({"static": (5, 2)}, limit_nodes=5))) == {"static": 2}


async def test_should_drift_partially_when_we_can_acquire_some_limits() -> None:
    """staticdrift_test.go Context("Limits and Scaling") It("should drift partially when
    we can acquire some limits"): five nodes, limits.nodes 7."""
    assert drifted(await decide(scene_of({"static": (5, 5)}, limit_nodes=7))) == {"static": 2}


async def test_should_keep_drifting_partially_when_we_can_acquire_some_limits() -> None:
    """staticdrift_test.go Context("Limits and Scaling") It("should keep drifting
    partially when we can acquire some limits for each reconcile"): five nodes, limits
    6, one at a time (the first reconcile; the later ones repeat it once the queue has
    replaced the node, which the queue's own tests cover)."""
    assert drifted(await decide(scene_of({"static": (5, 5)}, limit_nodes=6))) == {"static": 1}


async def test_should_wait_until_nodes_are_deprovisioned_when_we_are_overscaled() -> None:
    """staticdrift_test.go Context("Limits and Scaling") It("should wait until nodes are
    deprovisioned when we are overscaled"): two drifted nodes for one replica are left
    alone; once one is gone, the other is replaced."""
    scene = scene_of({"static": (1, 2)})
    scene.pod("pod-0", "static-0", cpu="1", memory="10Mi")
    assert await decide(scene) == []
    after = scene_of({"static": (1, 1)})
    after.pod("pod-0", "static-0", cpu="1", memory="10Mi")
    assert drifted(await decide(after)) == {"static": 1}


# -- staticdrift_test.go Context("Multiple NodePools"), Context("Edge Cases") -----------


async def test_should_handle_drift_for_multiple_static_nodepools_independently() -> None:
    """staticdrift_test.go Context("Multiple NodePools") It("should handle drift for
    multiple static NodePools independently"): the one whose limits.nodes leaves no room
    drifts nothing."""
    scene = no_pool()
    static_pool(scene, "nodepool-1", 3)
    static_pool(scene, "nodepool-2", 2, limit_nodes=2)
    static_pool(scene, "nodepool-3", 2)
    for name in ("nodepool-1", "nodepool-2", "nodepool-3"):
        static_nodes(scene, name, 2)
    assert drifted(await decide(scene)) == {"nodepool-1": 2, "nodepool-3": 2}


async def test_should_handle_zero_replicas() -> None:
    """staticdrift_test.go Context("Edge Cases") It("should handle zero replicas")"""
    assert await decide(scene_of({"static": (0, 1)})) == []


async def test_should_handle_missing_node_limits_gracefully() -> None:
    """staticdrift_test.go Context("Edge Cases") It("should handle missing node limits
    gracefully")"""
    assert drifted(await decide(scene_of({"static": (5, 5)}))) == {"static": 5}


async def test_should_ignore_nodes_without_the_drifted_status_condition() -> None:
    """staticdrift_test.go Context("Edge Cases") It("should ignore nodes without the
    drifted status condition") ("set to false" is in ``test_karpenter_conditions``)."""
    scene = no_pool()
    static_pool(scene, "static", 1)
    static_nodes(scene, "static", 1, drifted=False)
    assert await decide(scene) == []


async def test_should_ignore_static_nodes_with_the_do_not_disrupt_annotation() -> None:
    """staticdrift_test.go Context("Edge Cases") It("should ignore nodes with the
    karpenter.sh/do-not-disrupt annotation") (drifted here, so the annotation is what
    keeps it)."""
    scene = no_pool()
    static_pool(scene, "static", 1)
    static_nodes(scene, "static", 1, node_annotations={"karpenter.sh/do-not-disrupt": "true"})
    assert await decide(scene) == []


# -- Context("Static NodePool") of emptiness, consolidation and drift -------------------


def static_two(drifted_: bool) -> Scene:
    scene = no_pool()
    static_pool(scene, "static", 2)
    static_nodes(scene, "static", 2, drifted=drifted_)
    return scene


async def test_emptiness_should_not_consolidate_static_nodepool_nodes() -> None:
    """emptiness_test.go Context("Static NodePool") It("should not consolidate static
    NodePool nodes"): empty, Consolidatable, yet no candidate for emptiness or
    consolidation."""
    controller = SceneController(static_two(False))
    for method in (Emptiness(), SingleNodeConsolidation(), MultiNodeConsolidation()):
        assert (await controller.context(method)).candidates == []


async def test_consolidation_should_not_consolidate_static_nodepool_nodes() -> None:
    """consolidation_test.go Context("Static NodePool") It("should not consolidate
    static NodePool nodes")"""
    assert await decide(static_two(False)) == []


async def test_drift_should_not_consider_static_nodepool_for_drift() -> None:
    """drift_test.go Context("Static NodePool") It("should not consider static nodepool
    for drift"): Drift has no candidate (StaticDrift owns them)."""
    controller = SceneController(static_two(True))
    assert (await controller.context(Drift())).candidates == []
