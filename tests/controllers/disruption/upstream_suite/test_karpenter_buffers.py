"""Karpenter's emptiness_test.go Context("Buffer pod protection"), ported.

Karpenter's emptiness skips a node the provisioner's last simulation placed CapacityBuffer
virtual pods on (``cluster.HasBufferPods``); its consolidation instead simulates the
virtual pods with the candidates' own. karpy does the latter for both (a deliberate
difference, docs/disruption.md "Ported suite"): an empty node is deleted only if the
buffer's virtual pods still fit the machines left. Where the two agree, the cases are
ported as they are; the two that differ say how."""

from __future__ import annotations

from typing import Any

from ksuite import (
    LEAST_EXPENSIVE_SPOT,
    MOST_EXPENSIVE,
    Scene,
    decide,
    karpenter_scene,
    machine,
    names,
)

from karpy.controllers.capacitybuffer import build_virtual_pods


def headroom(count: int, cpu: str) -> list[Any]:
    """``count`` virtual pods of one CapacityBuffer, ``cpu`` each."""
    template = {"metadata": {"labels": {"app": "buffer"}},
                "spec": {"containers": [{"name": "c", "image": "pause",
                                         "resources": {"requests": {"cpu": cpu}}}]}}
    return list(build_virtual_pods("default", "headroom", "uid-1", template, count))


def empty_nodes(count: int) -> Scene:
    """The file's BeforeEach: a WhenEmpty NodePool, consolidatable nodes of the
    cheapest spot type with 32 CPUs allocatable."""
    scene = karpenter_scene(policy="WhenEmpty")
    for i in range(count):
        machine(scene, f"node-{i}", LEAST_EXPENSIVE_SPOT, cpu="32", memory="32Gi")
    return scene


async def test_should_not_disrupt_a_node_that_hosts_virtual_buffer_pods() -> None:
    """emptiness_test.go Context("Buffer pod protection") It("should not disrupt a node
    that hosts virtual buffer pods")"""
    scene = empty_nodes(1)
    scene.buffer = headroom(3, "1")
    assert await decide(scene) == []


async def test_should_disrupt_a_node_once_buffer_pods_are_cleared() -> None:
    """emptiness_test.go Context("Buffer pod protection") It("should disrupt a node once
    buffer pods are cleared")"""
    scene = empty_nodes(1)
    scene.buffer = headroom(2, "1")
    assert await decide(scene) == []
    scene.buffer = []
    assert names(await decide(scene)) == [("Empty", "delete", ["node-0"], 0)]


async def test_should_only_protect_the_specific_node_with_buffer_pods_not_others() -> None:
    """emptiness_test.go Context("Buffer pod protection") It("should only protect the
    specific node with buffer pods, not others"): one node goes, one stays for the
    headroom. Difference: Karpenter keeps the node its provisioner put the virtual pod
    on; karpy ties headroom to no node, so it keeps whichever is left (here node-1)."""
    scene = empty_nodes(2)
    scene.buffer = headroom(1, "1")
    assert names(await decide(scene)) == [("Empty", "delete", ["node-0"], 0)]


async def test_should_not_consider_a_node_with_real_pods_and_buffer_pods_as_empty() -> None:
    """emptiness_test.go Context("Buffer pod protection") It("should not consider a node
    with real pods AND buffer pods as empty")"""
    scene = empty_nodes(1)
    scene.pod("pod-0", "node-0", cpu="10m", memory="10Mi")
    scene.buffer = headroom(2, "1")
    assert await decide(scene) == []


async def test_should_protect_multiple_nodes_that_each_host_buffer_pods() -> None:
    """emptiness_test.go Context("Buffer pod protection") It("should protect multiple
    nodes that each host buffer pods"): headroom that needs both nodes keeps both.
    Difference: Karpenter keeps every node hosting a virtual pod even when the headroom
    would fit on fewer; karpy keeps only as many as the headroom needs (see
    :func:`test_headroom_that_fits_one_node_keeps_one`)."""
    scene = empty_nodes(2)
    scene.buffer = headroom(2, "20")
    assert await decide(scene) == []


async def test_headroom_that_fits_one_node_keeps_one() -> None:
    """karpy's side of the difference above: five 1-CPU virtual pods (Karpenter's 2 + 3)
    fit one 32-CPU node, so the other empty node is deleted."""
    scene = empty_nodes(2)
    scene.buffer = headroom(5, "1")
    assert names(await decide(scene)) == [("Empty", "delete", ["node-0"], 0)]


async def test_should_not_protect_a_node_with_zero_buffer_pod_count() -> None:
    """emptiness_test.go Context("Buffer pod protection") It("should not protect a node
    with zero buffer pod count")"""
    scene = empty_nodes(1)
    scene.buffer = headroom(0, "1")
    assert names(await decide(scene)) == [("Empty", "delete", ["node-0"], 0)]


# -- consolidation_test.go Context("Buffer Pods") ----------------------------------------


def expensive_nodes(count: int) -> Scene:
    """consolidation_test.go's nodes: the most expensive type, 32 CPUs allocatable,
    under a WhenEmptyOrUnderutilized NodePool."""
    scene = karpenter_scene()
    for i in range(count):
        machine(scene, f"node-{i}", MOST_EXPENSIVE, cpu="32", memory="32Gi")
    return scene


async def test_should_not_empty_consolidate_a_node_with_only_buffer_pods() -> None:
    """consolidation_test.go Context("Buffer Pods") It("should not empty-consolidate a
    node with only buffer pods"): nor is it replaced by a cheaper one (Karpenter's
    consolidation skips a node without real pods)."""
    scene = expensive_nodes(1)
    scene.buffer = headroom(5, "1")
    assert await decide(scene) == []


async def test_should_allow_consolidation_of_a_node_with_real_and_buffer_pods() -> None:
    """consolidation_test.go Context("Buffer Pods") It("should allow consolidation of a
    node with real pods and buffer pods to a cheaper instance"): the replacement holds
    the real pod and the headroom."""
    scene = expensive_nodes(1)
    scene.pod("pod-0", "node-0", cpu="1", memory="10Mi")
    scene.buffer = headroom(2, "1")
    [command] = await decide(scene)
    assert names([command]) == [("Underutilized", "replace", ["node-0"], 1)]
    [plan] = command.replacements
    assert {p.key for p in plan.pods} >= {p.key for p in scene.buffer}


async def test_should_skip_buffer_only_nodes_in_single_node_consolidation() -> None:
    """consolidation_test.go Context("Buffer Pods") It("should skip buffer-only nodes in
    single-node consolidation but protect via emptiness"): the buffer-only node-0 is in
    no command and stays. Difference: Karpenter protects it because its provisioner put
    four virtual pods there; karpy because the headroom (here 6 x 6 CPUs) needs it."""
    scene = expensive_nodes(2)
    scene.pod("pod-0", "node-1", cpu="1", memory="10Mi")
    scene.buffer = headroom(6, "6")
    for command in await decide(scene):
        assert "node-0" not in {c.name for c in command.candidates}


async def test_should_consolidate_a_buffer_node_once_buffer_pods_are_cleared() -> None:
    """consolidation_test.go Context("Buffer Pods") It("should consolidate a buffer node
    once buffer pods are cleared")"""
    scene = expensive_nodes(1)
    scene.buffer = headroom(3, "1")
    assert await decide(scene) == []
    scene.buffer = []
    assert names(await decide(scene)) == [("Empty", "delete", ["node-0"], 0)]
