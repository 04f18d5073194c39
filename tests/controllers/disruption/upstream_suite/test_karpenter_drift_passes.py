"""drift_test.go's budget cases over several reconciles, ported: each pass starts its
commands the way the orchestration queue does (the candidates are marked for deletion
in the cluster model, so they count against the budgets and are no longer
candidates), and the next pass decides again. Each test names the ``It(...)`` it
comes from."""

from __future__ import annotations

from typing import Any

from ksuite import MOST_EXPENSIVE, Scene, decide, karpenter_scene, machine

from karpy.controllers.disruption import Command

LABELS = {"app": "test"}


async def passes(scene: Scene, count: int) -> list[Command]:
    """``count`` disruption passes; every command started as the queue starts it."""
    started: list[Command] = []
    for _ in range(count):
        for command in await decide(scene):
            scene.cluster.mark_for_deletion(*(c.provider_id for c in command.candidates))
            started.append(command)
    return started


def node(scene: Scene, name: str, pool: str = "default", **kw: Any) -> None:
    machine(scene, name, MOST_EXPENSIVE, pool=pool, cpu="32", memory="128Gi",
            consolidatable_=False, **kw)


async def test_should_disrupt_3_nodes_taking_into_account_commands_in_progress() -> None:
    """drift_test.go Context("Budgets") It("should disrupt 3 nodes, taking into account
    commands in progress"): ten nodes, five drifted with a pod each, a 30 % budget; five
    passes start three commands, one node each."""
    scene = karpenter_scene(consolidate_after="1h", budgets=[{"nodes": "30%"}])
    for i in range(10):
        node(scene, f"node-{i}", drifted=i < 5)
    for i in range(5):
        scene.pod(f"pod-{i}", f"node-{i}", cpu="1", memory="10Mi", labels=LABELS)
    started = await passes(scene, 5)
    assert [(c.reason, len(c.candidates)) for c in started] == [("Drifted", 1)] * 3
    assert {c.candidates[0].name for c in started} <= {f"node-{i}" for i in range(5)}


async def test_should_respect_budgets_for_multiple_nodepools() -> None:
    """drift_test.go Context("Budgets") It("should respect budgets for multiple
    nodepools"): ten NodePools with a budget of one node, three drifted nodes each (two
    with a pod); thirty passes start ten commands, one per NodePool."""
    scene = karpenter_scene(consolidate_after="1h")
    for p in range(10):
        pool = f"pool-{p}"
        scene.pool(pool, consolidateAfter="Never", budgets=[{"nodes": "1"}])
        for i in range(3):
            node(scene, f"{pool}-{i}", pool=pool, drifted=True)
        for i in range(2):
            scene.pod(f"{pool}-pod-{i}", f"{pool}-{i}", cpu="1", memory="10Mi", labels=LABELS)
    started = await passes(scene, 30)
    assert all(c.reason == "Drifted" and len(c.candidates) == 1 for c in started)
    assert sorted(c.candidates[0].nodepool for c in started) == [f"pool-{p}" for p in range(10)]
