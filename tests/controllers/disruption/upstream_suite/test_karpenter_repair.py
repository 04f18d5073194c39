"""Karpenter v1.15.0's repair_test.go (sigs.k8s.io/karpenter@v1.15.0,
pkg/controllers/disruption), ported: node repair as a voluntary disruption method. Each
test names the ``It(...)`` it comes from. The file's BeforeEach: NodeRepair on, one
policy ``BadNode=False`` with a 30 minute toleration, repair run as an isolated method;
a node marked unhealthy is marked at the suite clock's now and the clock stepped past the
toleration. Cases about reboot, terminate-first and static NodePools are not ported:
karpy does not implement them yet (docs/disruption.md, Repair)."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest
from ksuite import MOST_EXPENSIVE, Scene, SceneController, karpenter_scene, machine, names

from karpy.cloudprovider import RepairPolicy
from karpy.controllers.disruption import DisruptionController
from karpy.controllers.disruption._command import Command
from karpy.controllers.disruption._events import DisruptionEvents
from karpy.controllers.disruption._repair import Repair
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.nodehealth.policy import RepairPolicyMatcher
from karpy.controllers.settings import FeatureGates, Settings
from karpy.runtime import format_time, freeze
from karpy.runtime.telemetry import Metrics
from karpy.runtime.testing import FakeClock, FakeEventRecorder
from karpy.state import Cluster
from karpy.state.kinds import NODE_CLAIM

BAD_NODE = RepairPolicy("BadNode", "False", timedelta(minutes=30))
PAST_TOLERATION = timedelta(minutes=31)


def unhealthy(
    scene: Scene,
    name: str,
    *,
    condition: str = "BadNode",
    reason: str = "",
    ago: timedelta = PAST_TOLERATION,
    status: str = "False",
) -> None:
    """markUnhealthyWithReason, then the clock stepped by ``ago``."""
    state = next(s for s in scene.cluster.nodes() if s.name == name)
    node: dict[str, Any] = copy.deepcopy(dict(state.node or {}))
    node = {**node, "metadata": dict(node["metadata"]), "status": dict(node["status"])}
    node["metadata"]["creationTimestamp"] = format_time(scene.now - timedelta(days=1))
    node["status"]["conditions"] = [*node["status"]["conditions"], {
        "type": condition, "status": status, "reason": reason,
        "lastTransitionTime": format_time(scene.now - ago)}]  # fmt: skip
    scene.cluster.update_node(freeze(node))


def node(scene: Scene, name: str = "node", **kw: Any) -> None:
    kw.setdefault("cpu", "32")
    kw.setdefault("memory", "128Gi")
    machine(scene, name, MOST_EXPENSIVE, consolidatable_=False, **kw)


def healthy(scene: Scene, count: int) -> None:
    for i in range(count):
        node(scene, f"healthy-{i}", cpu="1", memory="1Gi")


async def repair(scene: Scene, *policies: RepairPolicy) -> tuple[SceneController, list[Command]]:
    """One pass of the repair method alone (newRepairController)."""
    # the method is built here, around the test's policies (the controller's own is
    # built from the provider's, which the scene has none of)
    controller = SceneController(scene, Settings())
    method = Repair(matcher=RepairPolicyMatcher(policies or (BAD_NODE,)), clock=controller.clock,
                    events=controller._events, nodes=scene.cluster.nodes)  # fmt: skip
    return controller, await controller.run(method)


async def test_should_pre_spin_a_replacement_for_an_unhealthy_node() -> None:
    """It("should pre-spin a replacement and terminate the unhealthy node only after the
    replacement is healthy"): the command replaces (one replacement), reason Unhealthy;
    the queue deletes only after it is initialized (the queue's own tests)."""
    scene = karpenter_scene()
    node(scene)
    scene.pod("pod", "node", cpu="1", memory="1Gi")
    unhealthy(scene, "node")
    _, commands = await repair(scene)
    assert names(commands) == [("Unhealthy", "replace", ["node"], 1)]


async def test_should_delete_an_empty_unhealthy_node_without_pre_spinning() -> None:
    """It("should delete an empty unhealthy node without pre-spinning a replacement")"""
    scene = karpenter_scene()
    node(scene)
    unhealthy(scene, "node")
    _, commands = await repair(scene)
    assert names(commands) == [("Unhealthy", "delete", ["node"], 0)]


async def test_should_not_repair_before_the_toleration_duration_elapses() -> None:
    """It("should not repair before the toleration duration elapses")"""
    scene = karpenter_scene()
    node(scene)
    unhealthy(scene, "node", ago=timedelta(minutes=29))
    assert (await repair(scene))[1] == []


async def test_should_use_a_matching_reason_specific_policy_instead_of_the_fallback() -> None:
    """It("should use a matching reason-specific policy instead of the fallback"): the
    fallback tolerates 30 m, the reason-specific one 5 m; at 6 m the specific one acts,
    and its drain bound rides on the command."""
    specific = RepairPolicy(
        "BadNode",
        "False",
        timedelta(minutes=5),
        reason_regex="^Kernel",
        termination_grace_period=timedelta(minutes=2),
    )
    scene = karpenter_scene()
    node(scene)
    unhealthy(scene, "node", reason="KernelDeadlock", ago=timedelta(minutes=6))
    _, commands = await repair(scene, BAD_NODE, specific)
    assert names(commands) == [("Unhealthy", "delete", ["node"], 0)]
    assert commands[0].drain_bounds == {"node-claim": timedelta(minutes=2)}


async def test_should_use_the_condition_fallback_for_an_unknown_reason() -> None:
    """It("should use the condition fallback for an unknown reason"): a reason no
    specific policy matches waits for the fallback's toleration."""
    specific = RepairPolicy("BadNode", "False", timedelta(minutes=5), reason_regex="^Kernel")
    scene = karpenter_scene()
    node(scene)
    unhealthy(scene, "node", reason="Other", ago=timedelta(minutes=6))
    assert (await repair(scene, BAD_NODE, specific))[1] == []
    scene = karpenter_scene()
    node(scene)
    unhealthy(scene, "node", reason="Other")
    assert names((await repair(scene, BAD_NODE, specific))[1]) == [
        ("Unhealthy", "delete", ["node"], 0)
    ]


async def test_should_not_repair_a_node_carrying_the_do_not_repair_annotation() -> None:
    """It("should not repair a node carrying the do-not-repair annotation"): and the veto
    is reported (DisruptionBlocked)."""
    scene = karpenter_scene()
    node(scene, node_annotations={"karpenter.sh/do-not-repair": "true"})
    unhealthy(scene, "node")
    controller, commands = await repair(scene)
    assert commands == []
    assert controller.messages("DisruptionBlocked") == [
        'Repair is blocked through the "karpenter.sh/do-not-repair" annotation'
    ]


async def test_should_not_report_the_do_not_repair_veto_within_the_toleration() -> None:
    """It("should not report the do-not-repair veto while the node is still within its
    policy's toleration")"""
    scene = karpenter_scene()
    node(scene, node_annotations={"karpenter.sh/do-not-repair": "true"})
    unhealthy(scene, "node", ago=timedelta(minutes=1))
    controller, commands = await repair(scene)
    assert commands == [] and controller.messages("DisruptionBlocked") == []


async def test_should_still_repair_a_node_carrying_only_the_do_not_disrupt_annotation() -> None:
    """It("should still repair a node carrying only the do-not-disrupt annotation")"""
    scene = karpenter_scene()
    node(scene, node_annotations={"karpenter.sh/do-not-disrupt": "true"})
    unhealthy(scene, "node")
    assert names((await repair(scene))[1]) == [("Unhealthy", "delete", ["node"], 0)]


async def test_should_still_repair_when_do_not_repair_is_not_true() -> None:
    """It("should still repair a node whose do-not-repair annotation is not \"true\"")"""
    scene = karpenter_scene()
    node(scene, node_annotations={"karpenter.sh/do-not-repair": "false"})
    unhealthy(scene, "node")
    assert names((await repair(scene))[1]) == [("Unhealthy", "delete", ["node"], 0)]


async def test_should_not_repair_when_the_disruption_budget_is_zero() -> None:
    """It("should not repair when the disruption budget is zero"): an Unhealthy budget
    of 0 holds it; a zero budget for other reasons does not."""
    scene = karpenter_scene(budgets=[{"nodes": "0", "reasons": ["Unhealthy"]}])
    node(scene)
    unhealthy(scene, "node")
    assert (await repair(scene))[1] == []
    scene = karpenter_scene(budgets=[{"nodes": "0", "reasons": ["Drifted", "Underutilized"]}])
    node(scene)
    unhealthy(scene, "node")
    assert names((await repair(scene))[1]) == [("Unhealthy", "delete", ["node"], 0)]


async def test_a_not_ready_node_does_not_use_up_the_unhealthy_budget() -> None:
    """NodePoolStatsFromNodes (v1.15.0): with a budget of one node, a second node that
    is merely NotReady does not use the Unhealthy budget up (it would for drift)."""
    scene = karpenter_scene(budgets=[{"nodes": "1"}])
    node(scene, "node")
    node(scene, "sick", ready=False)
    unhealthy(scene, "node")
    assert names((await repair(scene))[1]) == [("Unhealthy", "delete", ["node"], 0)]


@pytest.mark.parametrize(("total", "sick", "repairs"), [(10, 3, False), (10, 2, True)])
async def test_should_stop_repairing_a_nodepool_when_over_20_percent_are_unhealthy(
    total: int, sick: int, repairs: bool
) -> None:
    """It("should stop repairing a NodePool when more than 20% of its nodes are
    unhealthy"): 3 of 10 trips the breaker (a NodeRepairBlocked warning), 2 of 10 not."""
    scene = karpenter_scene()
    for i in range(total):
        node(scene, f"node-{i}", cpu="1", memory="1Gi")
    for i in range(sick):
        unhealthy(scene, f"node-{i}")
    controller, commands = await repair(scene)
    assert bool(commands) is repairs
    blocked = controller.messages("NodeRepairBlocked")
    assert blocked == (
        [] if repairs else ['more than 20% of nodes in nodepool "default" are unhealthy']
    )


async def test_should_round_the_circuit_breaker_threshold_up_for_small_nodepools() -> None:
    """It("should round the repair circuit-breaker threshold up for small NodePools"):
    one unhealthy node of two is within ceil(20 % of 2) = 1."""
    scene = karpenter_scene()
    node(scene, "node")
    node(scene, "node-2")
    unhealthy(scene, "node")
    assert names((await repair(scene))[1]) == [("Unhealthy", "delete", ["node"], 0)]


async def test_should_repair_the_higher_priority_condition_first() -> None:
    """It("should repair the higher-priority condition first"): the newer node under the
    priority-100 policy goes before the older one under priority 0."""
    urgent = RepairPolicy("Urgent", "False", timedelta(minutes=30), priority=100, reason_regex=".*")
    scene = karpenter_scene()
    healthy(scene, 8)  # two unhealthy of ten: under the breaker
    node(scene, "old")
    node(scene, "new")
    unhealthy(scene, "old", ago=timedelta(minutes=50))
    unhealthy(scene, "new", condition="Urgent")
    assert names((await repair(scene, BAD_NODE, urgent))[1]) == [
        ("Unhealthy", "delete", ["new"], 0)
    ]


async def test_should_break_a_tie_by_node_name() -> None:
    """It("should break a tie by node name between candidates resolved at different
    times"): equal score and cost, the lower name first."""
    scene = karpenter_scene()
    healthy(scene, 8)
    node(scene, "b")
    node(scene, "a")
    unhealthy(scene, "a")
    unhealthy(scene, "b")
    assert names((await repair(scene))[1]) == [("Unhealthy", "delete", ["a"], 0)]


async def test_should_not_bypass_a_blocking_pod_without_a_bounded_drain() -> None:
    """It("should not bypass a blocking pod without a bounded drain")"""
    scene = karpenter_scene()
    node(scene)
    scene.pod("pod", "node", annotations={"karpenter.sh/do-not-disrupt": "true"})
    unhealthy(scene, "node")
    controller, commands = await repair(scene)
    assert commands == []
    assert controller.messages("DisruptionBlocked") == [
        "Repair requires a termination grace period to bypass blocking pods"
    ]


async def test_should_size_replacement_capacity_for_a_blocking_pod_when_bounded() -> None:
    """It("should size replacement capacity for a blocking pod when the drain is
    bounded"): the do-not-disrupt pod gets a replacement; the bound is
    min(policy 10m, NodeClaim 5m)."""
    bounded = RepairPolicy(
        "BadNode", "False", timedelta(minutes=30), termination_grace_period=timedelta(minutes=10)
    )
    scene = karpenter_scene()
    node(scene, grace="5m")
    scene.pod("pod", "node", annotations={"karpenter.sh/do-not-disrupt": "true"})
    unhealthy(scene, "node")
    _, commands = await repair(scene, bounded)
    assert names(commands) == [("Unhealthy", "replace", ["node"], 1)]
    assert commands[0].drain_bounds == {"node-claim": timedelta(minutes=5)}


async def test_should_not_repair_a_node_whose_condition_matches_no_policy() -> None:
    """It("should not repair a node whose condition does not match any policy")"""
    scene = karpenter_scene()
    node(scene)
    unhealthy(scene, "node", condition="OtherCondition")
    assert (await repair(scene))[1] == []


def test_should_not_repair_when_the_gate_is_off_or_legacy_node_repair_is_set() -> None:
    """It("should not repair when the NodeRepair feature gate is disabled") and It("should
    not repair when --legacy-node-repair is set"): the controller has no Unhealthy method
    then; with the gate on it goes first (NewMethods), built from the provider's
    policies."""

    class Policies:
        def repair_policies(self) -> tuple[RepairPolicy, ...]:
            return (BAD_NODE,)

    def reasons(settings: Settings) -> list[str]:
        clock = FakeClock()
        controller = DisruptionController(
            client=None,
            cache=None,
            cluster=Cluster(),
            scheduling=None,  # type: ignore[arg-type]
            cloud_provider=Policies(),
            queue=None,  # type: ignore[arg-type]
            events=DisruptionEvents(FakeEventRecorder(), clock),
            clock=clock,
            settings=settings,
            metrics=KarpenterMetrics(Metrics().meter("karpenter")),
        )
        return [m.reason for m in controller.methods]

    on = FeatureGates(node_repair=True)
    assert "Unhealthy" not in reasons(Settings())
    assert "Unhealthy" not in reasons(Settings(feature_gates=on, legacy_node_repair=True))
    assert reasons(Settings(feature_gates=on))[0] == "Unhealthy"


def test_a_bad_policy_set_is_refused_naming_the_policy() -> None:
    """newRepairPolicyMatcher (v1.15.0): bad priorities, regexes and fallbacks stop
    start-up with a message naming the policy."""
    with pytest.raises(ValueError, match=r"policy\[0\] \(BadNode=False\) has priority 101"):
        RepairPolicyMatcher([RepairPolicy("BadNode", "False", timedelta(0), priority=101)])
    with pytest.raises(ValueError, match="invalid reason_regex"):
        RepairPolicyMatcher([BAD_NODE, RepairPolicy("X", "True", timedelta(0), reason_regex="(")])
    with pytest.raises(ValueError, match="no fallback"):
        RepairPolicyMatcher([RepairPolicy("X", "True", timedelta(0), reason_regex=".*")])
    with pytest.raises(ValueError, match="must use action ReplaceNode"):
        RepairPolicyMatcher([RepairPolicy("X", "True", timedelta(0), action="RebootNode")])


async def test_should_repair_an_unhealthy_node_that_never_initialized() -> None:
    """Context("uninitialized nodes") It("should repair an unhealthy node that never
    initialized") and It("should repair without disruption budget")"""
    scene = karpenter_scene(budgets=[{"nodes": "0"}])
    node(scene, initialized=False)
    unhealthy(scene, "node")
    assert names((await repair(scene))[1]) == [("Unhealthy", "delete", ["node"], 0)]


@pytest.mark.parametrize(
    ("existing", "stamped"),
    [(None, "2026-11-23T12:02:00Z"), ("2026-11-23T12:01:00Z", "2026-11-23T12:01:00Z")],
)
async def test_should_stamp_the_drain_bound_before_requesting_deletion(
    existing: str | None, stamped: str
) -> None:
    """It("should stamp min(policy TGP, NodeClaim TGP) before requesting deletion") and
    It("should preserve an existing earlier termination deadline"): once the replacement
    is initialized the queue writes now + bound, never a later deadline, then deletes."""
    from test_karpenter_queue import Rig

    bounded = RepairPolicy(
        "BadNode", "False", timedelta(minutes=30), termination_grace_period=timedelta(minutes=2)
    )
    scene = karpenter_scene()
    node(scene)
    scene.pod("pod", "node", cpu="1", memory="1Gi")
    unhealthy(scene, "node")
    state = next(s for s in scene.cluster.nodes() if s.name == "node")
    claim = copy.deepcopy(dict(state.nodeclaim or {}))
    claim["metadata"] = dict(claim["metadata"])
    # termination's finalizer keeps the deleted NodeClaim readable
    claim["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    if existing:
        claim["metadata"]["annotations"] = {
            "karpenter.sh/nodeclaim-termination-timestamp": existing
        }
    scene.cluster.update_nodeclaim(freeze(claim))
    rig = Rig(scene)
    await rig.clock.step((scene.now - rig.clock.now()).total_seconds())
    await rig.publish()
    _, [command] = await repair(scene, bounded)
    await rig.queue.start(command)
    await rig.sync()
    await rig.reconcile()
    key = "karpenter.sh/nodeclaim-termination-timestamp"
    claim = rig.kube.peek(NODE_CLAIM, "node-claim")
    assert claim is not None and (claim["metadata"].get("annotations") or {}).get(key) == existing
    await rig.initialize("replacement-0")
    await rig.reconcile()
    claim = rig.kube.peek(NODE_CLAIM, "node-claim")
    assert claim is not None and claim["metadata"].get("deletionTimestamp")
    assert claim["metadata"]["annotations"][key] == stamped


def test_the_selected_policy_logs_karpenters_fields() -> None:
    """RepairResult.LogValues (v1.15.0): condition, status, reason, regex, fallback,
    action, eligibility and the drain bound as a Go duration."""
    scene = karpenter_scene()
    node(scene)
    unhealthy(scene, "node", reason="KernelDeadlock")
    bounded = RepairPolicy(
        "BadNode", "False", timedelta(minutes=30), termination_grace_period=timedelta(minutes=2)
    )
    state = next(s for s in scene.cluster.nodes() if s.name == "node")
    result = RepairPolicyMatcher([bounded]).resolve(state.node or {}, scene.now)
    assert result is not None
    values = result.log_values()
    assert {k: values[k] for k in ("condition", "status", "reason", "fallback", "action")} == {
        "condition": "BadNode", "status": "False", "reason": "KernelDeadlock",
        "fallback": True, "action": "ReplaceNode",
    }  # fmt: skip
    assert values["termination-grace-period"] == "2m0s"
