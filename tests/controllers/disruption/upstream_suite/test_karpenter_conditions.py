"""Karpenter's cases about a NodeClaim condition set to False rather than absent
(emptiness_test.go, drift_test.go, staticdrift_test.go) and emptiness_test.go's plain
"can delete empty nodes", ported. Each names the ``It(...)`` it comes from."""

from __future__ import annotations

from ksuite import (
    LEAST_EXPENSIVE_SPOT,
    MOST_EXPENSIVE,
    Scene,
    decide,
    karpenter_scene,
    machine,
    names,
)

from karpy.runtime import freeze, thaw


def set_false(scene: Scene, node: str, condition: str) -> None:
    """The machine's NodeClaim with ``condition`` False (replacing any True one)."""
    state = scene.cluster.node_by_name(node)
    assert state is not None and state.nodeclaim is not None
    claim = thaw(state.nodeclaim)
    conditions = [c for c in claim["status"]["conditions"] if c["type"] != condition]
    conditions.append({"type": condition, "status": "False", "reason": "NotEmpty",
                       "lastTransitionTime": "2026-11-23T11:00:00Z"})
    claim["status"]["conditions"] = conditions
    scene.cluster.update_nodeclaim(freeze(claim))


def empty_node() -> Scene:
    scene = karpenter_scene(policy="WhenEmpty")
    machine(scene, "node", LEAST_EXPENSIVE_SPOT, cpu="32", memory="32Gi")
    return scene


async def test_can_delete_empty_nodes() -> None:
    """emptiness_test.go Context("Emptiness") It("can delete empty nodes")"""
    assert names(await decide(empty_node())) == [("Empty", "delete", ["node"], 0)]


async def test_should_ignore_nodes_with_the_consolidatable_condition_set_to_false() -> None:
    """emptiness_test.go It("should ignore nodes with the consolidatable status condition
    set to false")"""
    scene = empty_node()
    set_false(scene, "node", "Consolidatable")
    assert await decide(scene) == []


async def test_should_ignore_nodes_with_the_drifted_status_condition_set_to_false() -> None:
    """drift_test.go It("should ignore nodes with the drifted status condition set to
    false")"""
    scene = karpenter_scene(consolidate_after="1h")
    machine(scene, "node", MOST_EXPENSIVE, cpu="32", memory="128Gi", drifted=True,
            consolidatable_=False)
    scene.pod("pod", "node", cpu="10m", memory="10Mi")
    set_false(scene, "node", "Drifted")
    assert await decide(scene) == []


async def test_static_should_ignore_nodes_with_the_drifted_condition_set_to_false() -> None:
    """staticdrift_test.go Context("Edge Cases") It("should ignore nodes with the
    drifted status condition set to false")"""
    scene = Scene(types=karpenter_scene().types)
    pool = scene.pool("static", budgets=[{"nodes": "100%"}])
    pool["spec"]["replicas"] = 1
    scene.cluster.update_nodepool(freeze(pool))
    machine(scene, "static-0", MOST_EXPENSIVE, pool="static", cpu="32", memory="32Gi",
            drifted=True)
    set_false(scene, "static-0", "Drifted")
    assert await decide(scene) == []
