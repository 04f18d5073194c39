"""Karpenter's queue_test.go (the orchestration queue), ported: each test names the
``It(...)`` it comes from. Commands come from karpy's real methods over Karpenter's fake
catalogue (see ``ksuite``); the queue writes to ``karpy.runtime.testing.FakeClient``.
The provisioner's part — creating the replacement NodeClaims — is played by
:class:`Launcher`, which creates a NodeClaim per plan and nothing else."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ksuite import (
    LEAST_EXPENSIVE,
    MOST_EXPENSIVE,
    Scene,
    SceneController,
    decide,
    karpenter_scene,
    machine,
)

from karpy.controllers.disruption import (
    Candidate,
    Command,
    OrchestrationQueue,
    build_candidate,
    consolidate,
)
from karpy.controllers.disruption._candidates import GRACEFUL
from karpy.controllers.disruption._events import DisruptionEvents
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.settings import Settings
from karpy.runtime import freeze, kinds
from karpy.runtime.telemetry import Metrics
from karpy.runtime.testing import FakeClient, FakeClock, FakeEventRecorder
from karpy.scheduling import NodeClaimPlan
from karpy.state.kinds import NODE_CLAIM

TAINT = "karpenter.sh/disrupted"
NOW_CONDITION = "2026-11-23T12:00:00Z"


class Launcher:
    """The provisioner's ``create``: one NodeClaim per plan, not initialized."""

    def __init__(self, kube: FakeClient) -> None:
        self.kube = kube
        self.created: list[str] = []

    async def create(self, plan: NodeClaimPlan, *, reason: str) -> str:
        name = f"replacement-{len(self.created)}"
        await self.kube.create(NODE_CLAIM, {
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": plan.nodepool}},
            "spec": {}, "status": {"conditions": []},
        })
        self.created.append(name)
        return name


class Rig:
    """A scene whose Nodes and NodeClaims also live in a FakeClient, and the queue."""

    def __init__(self, scene: Scene) -> None:
        self.scene = scene
        self.clock = FakeClock()
        self.kube = FakeClient(clock=self.clock)
        self.launcher = Launcher(self.kube)
        self.metrics = Metrics()
        self.queue = OrchestrationQueue(
            client=self.kube, cluster=scene.cluster,
            provisioner=self.launcher,  # type: ignore[arg-type]
            events=DisruptionEvents(FakeEventRecorder(), self.clock),
            clock=self.clock, settings=Settings(),
            metrics=KarpenterMetrics(self.metrics.meter("karpenter")),
        )

    async def publish(self) -> None:
        """Write the scene's Nodes and NodeClaims to the API, and feed back what the API
        stored (resourceVersions) to the cluster model, as informers would."""
        for state in list(self.scene.cluster.nodes()):
            for kind, obj, update in (
                (kinds.NODE, state.node, self.scene.cluster.update_node),
                (NODE_CLAIM, state.nodeclaim, self.scene.cluster.update_nodeclaim),
            ):
                if obj is None or self.kube.peek(kind, obj["metadata"]["name"]) is not None:
                    continue
                body = _thaw(obj)
                body["metadata"].pop("resourceVersion", None)
                update(freeze(await self.kube.create(kind, body)))

    async def sync(self) -> None:
        """Feed the API's Nodes and NodeClaims to the cluster model (the informers)."""
        for obj in await self.kube.list(kinds.NODE):
            self.scene.cluster.update_node(freeze(obj))
        for obj in await self.kube.list(NODE_CLAIM):
            self.scene.cluster.update_nodeclaim(freeze(obj))

    async def start(self) -> list[Command]:
        await self.publish()
        commands = await decide(self.scene)
        for command in commands:
            await self.queue.start(command)
        await self.sync()
        return commands

    async def reconcile(self) -> Any:
        result = await self.queue.reconcile()
        await self.sync()
        return result

    async def initialize(self, name: str) -> None:
        await self.kube.patch_status(NODE_CLAIM, name, {"status": {"conditions": [
            {"type": "Initialized", "status": "True", "reason": "Initialized",
             "lastTransitionTime": NOW_CONDITION}]}})

    async def tainted(self, node: str) -> bool:
        obj = await self.kube.get(kinds.NODE, node)
        return any(t.get("key") == TAINT for t in obj["spec"].get("taints") or ())

    def claim_exists(self, name: str) -> bool:
        obj = self.kube.peek(NODE_CLAIM, name)
        return obj is not None and not obj["metadata"].get("deletionTimestamp")


def _thaw(obj: Any) -> Any:
    if isinstance(obj, dict) or hasattr(obj, "items"):
        return {k: _thaw(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_thaw(v) for v in obj]
    return copy.copy(obj)


def candidate(scene: Scene, node: str) -> Candidate:
    state = scene.cluster.node_by_name(node)
    assert state is not None
    built = build_candidate(state, scene.snapshot(), GRACEFUL)
    assert isinstance(built, Candidate), built
    return built


def replace_scene(count: int = 1) -> Scene:
    """``count`` most-expensive nodes, one small pod each, the pods kept apart by
    hostname anti-affinity: each node is replaced by a cheaper one."""
    scene = karpenter_scene()
    apart = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "apart"}},
         "topologyKey": "kubernetes.io/hostname"}]}}
    for i in range(count):
        machine(scene, f"node-{i}", MOST_EXPENSIVE, cpu="32", memory="128Gi")
        scene.pod(f"pod-{i}", f"node-{i}", cpu="10m", memory="10Mi", labels={"app": "apart"},
                  affinity=apart)
    return scene


async def test_should_keep_nodes_tainted_when_replacements_havent_finished_initialization() -> None:
    """queue_test.go It("should keep nodes tainted when replacements haven't finished
    initialization")"""
    rig = Rig(replace_scene())
    [command] = await rig.start()
    assert rig.launcher.created == ["replacement-0"]
    await rig.reconcile()
    assert await rig.tainted("node-0")
    assert rig.claim_exists("node-0-claim")
    assert rig.queue.has(command.candidates[0].provider_id)


async def test_should_not_return_an_error_when_handling_commands_before_the_timeout() -> None:
    """queue_test.go It("should not return an error when handling commands before the
    timeout")"""
    rig = Rig(replace_scene())
    await rig.start()
    await rig.clock.step(9 * 60)
    result = await rig.reconcile()
    assert result.requeue_after
    assert not rig.queue.empty()


async def test_should_wait_when_the_nodeclaim_is_in_cluster_state_only() -> None:
    """queue_test.go It("should not return an error when the NodeClaim doesn't exist but
    the NodeCliam is in cluster state"): the API has not shown the replacement yet."""
    rig = Rig(replace_scene())
    await rig.start()
    await rig.kube.delete(NODE_CLAIM, "replacement-0")
    claim = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
             "metadata": {"name": "replacement-0", "labels": {"karpenter.sh/nodepool": "default"}},
             "spec": {}, "status": {}}
    rig.scene.cluster.update_nodeclaim(freeze(claim))
    await rig.reconcile()
    assert not rig.queue.empty()
    assert await rig.tainted("node-0")


async def test_should_untaint_nodes_when_a_command_times_out() -> None:
    """queue_test.go It("should untaint nodes when a command times out")"""
    rig = Rig(replace_scene())
    await rig.start()
    await rig.clock.step(11 * 60)
    await rig.reconcile()
    assert rig.queue.empty()
    assert not await rig.tainted("node-0")
    assert rig.claim_exists("node-0-claim")
    assert not rig.scene.cluster.node_by_name("node-0").marked_for_deletion  # type: ignore[union-attr]


async def test_should_fully_handle_a_command_when_replacements_are_initialized() -> None:
    """queue_test.go It("should fully handle a command when replacements are
    initialized")"""
    rig = Rig(replace_scene())
    await rig.start()
    await rig.initialize("replacement-0")
    await rig.reconcile()
    assert rig.queue.empty()
    assert not rig.claim_exists("node-0-claim")


async def test_should_only_finish_a_command_when_all_replacements_are_initialized() -> None:
    """queue_test.go It("should only finish a command when all replacements are
    initialized"): a command with two replacements (here a split)."""
    scene = karpenter_scene()
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "a"}},
         "topologyKey": "kubernetes.io/hostname"}]}}
    machine(scene, "node-0", MOST_EXPENSIVE, cpu="32", memory="128Gi")
    for i in range(2):
        scene.pod(f"pod-{i}", "node-0", cpu="10m", memory="10Mi", labels={"app": "a"},
                  affinity=affinity)
    rig = Rig(scene)
    await rig.start()
    assert rig.launcher.created == ["replacement-0", "replacement-1"]
    await rig.initialize("replacement-0")
    await rig.reconcile()
    assert not rig.queue.empty()
    assert rig.claim_exists("node-0-claim")
    await rig.initialize("replacement-1")
    await rig.reconcile()
    assert rig.queue.empty()
    assert not rig.claim_exists("node-0-claim")


async def test_should_not_wait_for_replacements_when_none_are_needed() -> None:
    """queue_test.go It("should not wait for replacements when none are needed")"""
    scene = karpenter_scene()
    machine(scene, "node-0", LEAST_EXPENSIVE, cpu="32", memory="32Gi")
    machine(scene, "node-1", LEAST_EXPENSIVE, cpu="32", memory="32Gi")
    scene.pod("pod-0", "node-0", cpu="10m", memory="10Mi")
    scene.pod("pod-1", "node-0", cpu="10m", memory="10Mi")
    scene.pod("pod-2", "node-1", cpu="10m", memory="10Mi")
    rig = Rig(scene)
    [command] = await rig.start()
    assert not command.replacements
    await rig.reconcile()
    assert rig.queue.empty()
    assert not rig.claim_exists("node-1-claim")


async def test_should_finish_two_commands_in_order_as_replacements_are_initialized() -> None:
    """queue_test.go It("should finish two commands in order as replacements are
    initialized"): two single-node replace commands, started one after the other."""
    rig = Rig(replace_scene(2))
    await rig.publish()
    whatif = rig.scene.whatif()
    first, second = (consolidate(whatif, [candidate(rig.scene, n)]) for n in ("node-0", "node-1"))
    assert isinstance(first, Command) and isinstance(second, Command)
    await rig.queue.start(first)
    await rig.queue.start(second)
    await rig.sync()
    assert {first.candidates[0].name, second.candidates[0].name} == {"node-0", "node-1"}
    await rig.initialize(first.replacement_names[0])
    await rig.reconcile()
    assert not rig.claim_exists(first.candidates[0].state.nodeclaim_name)
    assert rig.claim_exists(second.candidates[0].state.nodeclaim_name)
    assert not rig.queue.has(first.candidates[0].provider_id)
    await rig.initialize(second.replacement_names[0])
    await rig.reconcile()
    assert rig.queue.empty()


@pytest.mark.parametrize(("running", "timeout"), [(1, 600.0), (10_000, 800.0),
                                                  (100_000, 3600.0)])
def test_calculate_retry_duration(running: int, timeout: float) -> None:
    """queue_test.go Context("CalculateRetryDuration"): 10 minutes, growing by 80 ms per
    running command, at most an hour."""
    rig = Rig(karpenter_scene())
    rig.queue._commands = {str(i): Command(reason="Underutilized", consolidation_type="single",
                                           candidates=[], created=float(i))
                           for i in range(running)}
    assert rig.queue._timeout() == pytest.approx(timeout)


async def test_should_remove_taints_left_tainted_from_a_previous_disruption_action() -> None:
    """suite_test.go It("should remove taints from NodeClaims that were left tainted
    from a previous disruption action"): a node tainted ``karpenter.sh/disrupted`` and a
    NodeClaim with DisruptionReason, in no running command (what a crash mid-command
    leaves), are cleaned up by the next disruption pass."""
    scene = karpenter_scene(consolidate_after="Never")
    machine(scene, "node", LEAST_EXPENSIVE, cpu="32", memory="32Gi")
    scene.pod("pod", "node", cpu="100m", memory="100Mi")
    state = scene.cluster.node_by_name("node")
    assert state is not None and state.node is not None and state.nodeclaim is not None
    node = _thaw(state.node)
    node["spec"]["taints"] = [{"key": TAINT, "effect": "NoSchedule"}]
    scene.cluster.update_node(freeze(node))
    claim = _thaw(state.nodeclaim)
    claim["status"]["conditions"].append(
        {"type": "DisruptionReason", "status": "True", "reason": "Underutilized",
         "lastTransitionTime": NOW_CONDITION})
    scene.cluster.update_nodeclaim(freeze(claim))
    rig = Rig(scene)
    await rig.publish()
    assert await rig.tainted("node")
    controller = SceneController(scene)
    controller._client = rig.kube  # the pass writes through the rig's API
    controller.queue = rig.queue
    await controller.reconcile()
    assert not await rig.tainted("node")
    stored = await rig.kube.get(NODE_CLAIM, "node-claim")
    assert all(c["type"] != "DisruptionReason" for c in stored["status"]["conditions"])


async def test_should_untaint_nodes_when_drift_replacement_fails() -> None:
    """drift_test.go It("should untaint nodes when drift replacement fails"): the
    replacement NodeClaim is deleted before it initializes; the command fails and the
    drifted node is untainted."""
    scene = karpenter_scene(consolidate_after="1h")
    machine(scene, "node", MOST_EXPENSIVE, cpu="32", memory="128Gi", drifted=True,
            consolidatable_=False)
    scene.pod("pod", "node", cpu="10m", memory="10Mi", labels={"app": "test"})
    rig = Rig(scene)
    [command] = await rig.start()
    assert command.reason == "Drifted" and rig.launcher.created == ["replacement-0"]
    assert await rig.tainted("node")
    gone = await rig.kube.get(NODE_CLAIM, "replacement-0")
    await rig.kube.delete(NODE_CLAIM, "replacement-0")
    scene.cluster.delete_nodeclaim(freeze(gone))
    await rig.reconcile()
    assert not await rig.tainted("node")
    assert rig.claim_exists("node-claim")


async def test_should_add_and_remove_taints_from_nodeclaims_that_fail_to_disrupt() -> None:
    """suite_test.go It("should add and remove taints from NodeClaims that fail to
    disrupt"): starting the replace taints the node and sets DisruptionReason; once the
    replacement is deleted, the failed command takes both off again."""
    scene = replace_scene(1)
    rig = Rig(scene)
    [command] = await rig.start()
    assert str(command.decision) == "replace"
    assert await rig.tainted("node-0")

    async def reasons() -> list[str]:
        claim = await rig.kube.get(NODE_CLAIM, "node-0-claim")
        return [c["status"] for c in claim["status"]["conditions"]
                if c["type"] == "DisruptionReason"]

    assert await reasons() == ["True"]
    gone = await rig.kube.get(NODE_CLAIM, "replacement-0")
    await rig.kube.delete(NODE_CLAIM, "replacement-0")
    scene.cluster.delete_nodeclaim(freeze(gone))
    await rig.reconcile()
    assert not await rig.tainted("node-0")
    assert await reasons() == []


def disrupted(rig: Rig, metric: str) -> list[str]:
    """The series of one counter the queue recorded, as exposition lines."""
    return sorted(line for line in rig.metrics.render().decode().splitlines()
                  if line.startswith(metric + "{"))


@pytest.mark.parametrize(("grace", "mode"), [(None, "graceful"), ("1h", "eventual"),
                                             ("0s", "forceful")])
async def test_a_consolidated_nodeclaim_is_counted_with_its_policy_and_termination_mode(
    grace: str | None, mode: str,
) -> None:
    """Not a queue_test.go case: Karpenter v1.15's queue.go labels the disrupted count
    and the pods whose disruption it began with the NodePool's consolidation policy
    (snake-cased) and the NodeClaim's termination mode."""
    scene = karpenter_scene(policy="WhenEmptyOrUnderutilized")
    machine(scene, "node-0", LEAST_EXPENSIVE, cpu="32", memory="32Gi", grace=grace)
    machine(scene, "node-1", LEAST_EXPENSIVE, cpu="32", memory="32Gi")
    scene.pod("pod-0", "node-0", cpu="10m", memory="10Mi")
    scene.pod("pod-1", "node-0", cpu="10m", memory="10Mi")
    for i in range(2, 5):
        scene.pod(f"pod-{i}", "node-1", cpu="10m", memory="10Mi")
    rig = Rig(scene)
    [command] = await rig.start()
    assert [c.name for c in command.candidates] == ["node-0"]
    await rig.reconcile()
    labels = (f'capacity_type="on-demand",consolidation_policy="when_empty_or_underutilized",'
              f'nodepool="default",reason="underutilized",termination_mode="{mode}"')
    assert disrupted(rig, "karpenter_nodeclaims_disrupted_total") == [
        f"karpenter_nodeclaims_disrupted_total{{{labels}}} 1.0"]
    assert disrupted(rig, "karpenter_pods_disruption_initiated_total") == [
        f"karpenter_pods_disruption_initiated_total{{{labels}}} 2.0"]


async def test_a_drifted_nodeclaim_is_counted_without_a_consolidation_policy() -> None:
    """Drift passes through the same queue: Karpenter leaves the policy label empty."""
    scene = karpenter_scene(policy="WhenEmpty")
    machine(scene, "node-0", LEAST_EXPENSIVE, cpu="32", memory="32Gi", drifted=True,
            grace="10m")
    machine(scene, "node-1", LEAST_EXPENSIVE, cpu="32", memory="32Gi")
    scene.pod("pod-0", "node-0", cpu="10m", memory="10Mi")
    scene.pod("pod-1", "node-1", cpu="10m", memory="10Mi")
    rig = Rig(scene)
    [command] = await rig.start()
    assert command.reason == "Drifted"
    await rig.reconcile()
    assert disrupted(rig, "karpenter_nodeclaims_disrupted_total") == [
        'karpenter_nodeclaims_disrupted_total{capacity_type="on-demand",consolidation_policy="",'
        'nodepool="default",reason="drifted",termination_mode="eventual"} 1.0']
