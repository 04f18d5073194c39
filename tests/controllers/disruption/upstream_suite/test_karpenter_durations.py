"""Karpenter's duration-based ``karpenter.sh/do-not-disrupt`` cases, ported
(consolidation_test.go Context("Delete") and drift_test.go): a pod annotated with a
duration ("2m") protects its node for that long after the pod started; a value that is
neither "true" nor a duration protects nothing. Each test names the ``It(...)`` it comes
from; the scene's clock (``Scene.now``) stands for the suite's ``env.Clock.Step``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ksuite import LEAST_EXPENSIVE, MOST_EXPENSIVE, Scene, decide, karpenter_scene, machine, names

from karpy.runtime import freeze

LABELS = {"app": "test"}
DND = "karpenter.sh/do-not-disrupt"


def annotated(scene: Scene, name: str, node: str, value: str, *,
              started_ago: timedelta = timedelta(0), **kw: Any) -> None:
    """A pod on ``node`` with do-not-disrupt ``value``, started ``started_ago`` before
    the scene's now."""
    pod = scene.pod(name, node, cpu=kw.pop("cpu", "10m"), memory="10Mi",
                    annotations={DND: value}, labels=LABELS, **kw)
    pod["status"]["startTime"] = (scene.now - started_ago).strftime("%Y-%m-%dT%H:%M:%SZ")
    scene.cluster.update_pod(freeze(pod))


def two_cheapest() -> Scene:
    """consolidation_test.go Context("Delete")'s BeforeEach: two consolidatable nodes of
    the cheapest on-demand type, 32 CPUs allocatable."""
    scene = karpenter_scene()
    for name in ("node-0", "node-1"):
        machine(scene, name, LEAST_EXPENSIVE, cpu="32", memory="32Gi")
    return scene


async def test_does_not_consolidate_nodes_with_an_active_duration_do_not_disrupt() -> None:
    """consolidation_test.go It("does not consolidate nodes with pods that have a
    duration-based do-not-disrupt annotation that is still active"): node-1's pod is
    protected for 2m, so node-0 (two pods) goes instead."""
    scene = two_cheapest()
    scene.pod("pod-0", "node-0", cpu="10m", memory="10Mi", labels=LABELS)
    scene.pod("pod-1", "node-0", cpu="10m", memory="10Mi", labels=LABELS)
    annotated(scene, "pod-2", "node-1", "2m")
    assert names(await decide(scene)) == [("Underutilized", "delete", ["node-0"], 0)]


async def test_can_consolidate_nodes_after_duration_do_not_disrupt_expires() -> None:
    """consolidation_test.go It("can consolidate nodes after duration-based
    do-not-disrupt annotation expires"): every pod protected for 2m blocks both nodes;
    three minutes later one node goes."""
    scene = two_cheapest()
    annotated(scene, "pod-0", "node-0", "2m")
    annotated(scene, "pod-1", "node-0", "2m")
    annotated(scene, "pod-2", "node-1", "2m")
    assert await decide(scene) == []
    scene.now += timedelta(minutes=3)
    assert names(await decide(scene)) == [("Underutilized", "delete", ["node-1"], 0)]


async def test_can_delete_nodes_invalid_do_not_disrupt_format_is_not_blocking() -> None:
    """consolidation_test.go It("can delete nodes, considers invalid do-not-disrupt
    annotation format as not blocking")"""
    scene = two_cheapest()
    scene.pod("pod-0", "node-0", cpu="10m", memory="10Mi", labels=LABELS)
    scene.pod("pod-1", "node-0", cpu="10m", memory="10Mi", labels=LABELS)
    annotated(scene, "pod-2", "node-1", "invalid-format")
    assert names(await decide(scene)) == [("Underutilized", "delete", ["node-1"], 0)]


def drifted_node(scene: Scene, name: str = "node") -> None:
    """drift_test.go's BeforeEach node: drifted, most expensive type, 32 CPUs."""
    machine(scene, name, MOST_EXPENSIVE, cpu="32", memory="128Gi", drifted=True,
            consolidatable_=False)


async def test_should_not_drift_nodes_with_an_active_duration_do_not_disrupt() -> None:
    """drift_test.go It("should not drift nodes with pods that have a duration-based
    do-not-disrupt annotation that is still active"), then past the 2m: replaced."""
    scene = karpenter_scene(consolidate_after="1h")
    drifted_node(scene)
    annotated(scene, "pod", "node", "2m")
    assert await decide(scene) == []
    scene.now += timedelta(minutes=3)
    assert names(await decide(scene)) == [("Drifted", "replace", ["node"], 1)]


async def test_should_drift_nodes_with_an_invalid_do_not_disrupt_format() -> None:
    """drift_test.go It("should drift nodes with pods that have an invalid
    do-not-disrupt annotation format"): the pod moves to the other, not drifted node."""
    scene = karpenter_scene(consolidate_after="1h")
    drifted_node(scene)
    machine(scene, "node-2", MOST_EXPENSIVE, cpu="32", memory="128Gi", consolidatable_=False)
    annotated(scene, "pod", "node", "invalid-format")
    assert names(await decide(scene)) == [("Drifted", "delete", ["node"], 0)]


async def test_should_not_drift_until_the_longest_duration_do_not_disrupt_expires() -> None:
    """drift_test.go It("should not drift nodes until the longest duration-based
    do-not-disrupt grace period expires across multiple pods"): 1m and 3m."""
    scene = karpenter_scene(consolidate_after="1h")
    drifted_node(scene)
    annotated(scene, "pod-1", "node", "1m")
    annotated(scene, "pod-2", "node", "3m")
    assert await decide(scene) == []
    scene.now += timedelta(minutes=2)
    assert await decide(scene) == []
    scene.now += timedelta(minutes=2)
    assert names(await decide(scene)) == [("Drifted", "replace", ["node"], 1)]
