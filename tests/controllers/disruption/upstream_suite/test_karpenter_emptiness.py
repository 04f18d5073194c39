"""Karpenter's emptiness_test.go, ported: each test names the ``It(...)`` it comes from
and decides over Karpenter's fake catalogue (see ``ksuite``)."""

from __future__ import annotations

from ksuite import (
    LEAST_EXPENSIVE,
    LEAST_EXPENSIVE_SPOT,
    Scene,
    SceneController,
    decide,
    karpenter_scene,
    machine,
    names,
)

from karpy.controllers.disruption._emptiness import Emptiness


def two_empty_spot_nodes(**pool: object) -> Scene:
    """The file's BeforeEach: a WhenEmpty NodePool, two consolidatable nodes of the
    cheapest spot type with 32 CPUs allocatable."""
    scene = karpenter_scene(policy="WhenEmpty", **pool)  # type: ignore[arg-type]
    for name in ("node-0", "node-1"):
        machine(scene, name, LEAST_EXPENSIVE_SPOT, cpu="32", memory="32Gi")
    return scene


def empty_nodes(scene: Scene, count: int, *, pool: str = "default") -> None:
    for i in range(count):
        machine(scene, f"{pool}-{i}", LEAST_EXPENSIVE, pool=pool, cpu="32", memory="32Gi")


async def test_can_delete_multiple_empty_nodes() -> None:
    """emptiness_test.go It("can delete multiple empty nodes")"""
    assert names(await decide(two_empty_spot_nodes())) == [
        ("Empty", "delete", ["node-0", "node-1"], 0)
    ]


async def test_should_ignore_nodes_without_the_consolidatable_status_condition() -> None:
    """emptiness_test.go It("should ignore nodes without the consolidatable status
    condition")"""
    scene = karpenter_scene(policy="WhenEmpty")
    machine(scene, "node-0", LEAST_EXPENSIVE_SPOT, cpu="32", memory="32Gi",
            consolidatable_=False)
    assert await decide(scene) == []


async def test_should_ignore_nodes_with_the_do_not_disrupt_annotation() -> None:
    """emptiness_test.go It("should ignore nodes with the karpenter.sh/do-not-disrupt
    annotation")"""
    scene = karpenter_scene(policy="WhenEmpty")
    machine(scene, "node-0", LEAST_EXPENSIVE_SPOT, cpu="32", memory="32Gi",
            node_annotations={"karpenter.sh/do-not-disrupt": "true"})
    assert await decide(scene) == []


async def test_should_delete_nodes_with_the_do_not_disrupt_annotation_set_to_false() -> None:
    """emptiness_test.go It("should delete nodes with the karpenter.sh/do-not-disrupt
    annotation set to false")"""
    scene = karpenter_scene(policy="WhenEmpty")
    machine(scene, "node-0", LEAST_EXPENSIVE_SPOT, cpu="32", memory="32Gi",
            node_annotations={"karpenter.sh/do-not-disrupt": "false"})
    assert names(await decide(scene)) == [("Empty", "delete", ["node-0"], 0)]


async def test_should_ignore_nodes_that_have_pods() -> None:
    """emptiness_test.go It("should ignore nodes that have pods")"""
    scene = karpenter_scene(policy="WhenEmpty")
    machine(scene, "node-0", LEAST_EXPENSIVE_SPOT, cpu="32", memory="32Gi")
    scene.pod("pod", "node-0", cpu="100m", memory="100Mi")
    assert await decide(scene) == []


async def test_will_consider_a_node_with_a_daemonset_pod_as_empty() -> None:
    """emptiness_test.go It("will consider a node with a DaemonSet pod as empty")"""
    scene = karpenter_scene(policy="WhenEmpty")
    machine(scene, "node-0", LEAST_EXPENSIVE, cpu="32", memory="32Gi")
    scene.pod("ds-pod", "node-0", cpu="100m", memory="100Mi", owner_kind="DaemonSet")
    assert names(await decide(scene)) == [("Empty", "delete", ["node-0"], 0)]


async def test_will_consider_a_node_with_terminating_deployment_pods_as_empty() -> None:
    """emptiness_test.go It("will consider a node with terminating Deployment pods as
    empty")"""
    scene = karpenter_scene(policy="WhenEmpty")
    machine(scene, "node-0", LEAST_EXPENSIVE, cpu="32", memory="32Gi")
    for i in range(3):
        scene.pod(f"pod-{i}", "node-0", cpu="100m", memory="100Mi", deleting=True,
                  phase="Running")
    assert names(await decide(scene)) == [("Empty", "delete", ["node-0"], 0)]


async def test_will_not_consider_a_node_with_a_terminating_statefulset_pod_as_empty() -> None:
    """emptiness_test.go It("will not consider a node with a terminating StatefulSet pod
    as empty")"""
    scene = karpenter_scene(policy="WhenEmpty")
    machine(scene, "node-0", LEAST_EXPENSIVE, cpu="32", memory="32Gi")
    scene.pod("db-0", "node-0", cpu="100m", memory="100Mi", deleting=True, phase="Running",
              owner_kind="StatefulSet", owner_name="db")
    assert await decide(scene) == []


async def test_considers_pending_pods_when_consolidating() -> None:
    """emptiness_test.go It("considers pending pods when consolidating"): a huge pending
    pod needs the large node, so it is neither deleted nor replaced."""
    scene = karpenter_scene(policy="WhenEmptyOrUnderutilized")
    large = "64-cpu-1-mem-amd64-linux-test-zone-1-spot"  # the cheapest 64-CPU type
    machine(scene, "large", large)
    scene.pod("bound", "large", cpu="1", memory="0")
    scene.pending("unsched", cpu="62", memory="0")
    assert await decide(scene) == []


async def test_should_allow_all_empty_nodes_to_be_disrupted() -> None:
    """emptiness_test.go Context("Budgets") It("should allow all empty nodes to be
    disrupted")"""
    scene = karpenter_scene(policy="WhenEmpty", budgets=[{"nodes": "100%"}])
    empty_nodes(scene, 10)
    [command] = await decide(scene)
    assert len(command.candidates) == 10


async def test_should_allow_no_empty_nodes_to_be_disrupted() -> None:
    """emptiness_test.go Context("Budgets") It("should allow no empty nodes to be
    disrupted")"""
    scene = karpenter_scene(policy="WhenEmpty", budgets=[{"nodes": "0%"}])
    empty_nodes(scene, 10)
    controller = SceneController(scene)
    assert await decide(scene) == []
    await controller.run(Emptiness())
    assert controller.messages("DisruptionBlocked") == [
        "No allowed disruptions for disruption reason Empty due to blocking budget"
    ]


async def test_should_only_allow_3_empty_nodes_to_be_disrupted() -> None:
    """emptiness_test.go Context("Budgets") It("should only allow 3 empty nodes to be
    disrupted")"""
    scene = karpenter_scene(policy="WhenEmpty", budgets=[{"nodes": "30%"}])
    empty_nodes(scene, 10)
    [command] = await decide(scene)
    assert len(command.candidates) == 3


async def test_should_allow_2_nodes_from_each_nodepool_to_be_deleted() -> None:
    """emptiness_test.go Context("Budgets") It("should allow 2 nodes from each nodePool
    to be deleted"): 50 % of 3 nodes rounds up to 2, per NodePool."""
    scene = karpenter_scene(policy="WhenEmpty")
    for i in range(10):
        pool = f"np-{i}"
        scene.pool(pool, consolidateAfter="30s", consolidationPolicy="WhenEmpty",
                   budgets=[{"nodes": "50%"}])
        empty_nodes(scene, 3, pool=pool)
    [command] = await decide(scene)
    assert len(command.candidates) == 20
    per_pool: dict[str, int] = {}
    for c in command.candidates:
        per_pool[c.nodepool] = per_pool.get(c.nodepool, 0) + 1
    assert per_pool == {f"np-{i}": 2 for i in range(10)}


async def test_should_allow_all_nodes_from_each_nodepool_to_be_deleted() -> None:
    """emptiness_test.go Context("Budgets") It("should allow all nodes from each nodePool
    to be deleted")"""
    scene = karpenter_scene(policy="WhenEmpty")
    for i in range(10):
        pool = f"np-{i}"
        scene.pool(pool, consolidateAfter="30s", consolidationPolicy="WhenEmpty",
                   budgets=[{"nodes": "100%"}])
        empty_nodes(scene, 3, pool=pool)
    [command] = await decide(scene)
    assert len(command.candidates) == 30


async def test_can_delete_empty_and_drifted_nodes() -> None:
    """emptiness_test.go It("can delete empty and drifted nodes"): emptiness runs first,
    so an empty drifted node goes as Empty."""
    scene = karpenter_scene(policy="WhenEmpty")
    machine(scene, "node-0", LEAST_EXPENSIVE_SPOT, cpu="32", memory="32Gi", drifted=True)
    assert names(await decide(scene)) == [("Empty", "delete", ["node-0"], 0)]
