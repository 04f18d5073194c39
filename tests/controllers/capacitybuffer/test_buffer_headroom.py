"""CapacityBuffer headroom as virtual pods: the provisioner buys capacity for them (and
buys it again when real pods take it), never nominates them nor reports events for
them; disruption's what-if must place them too, so the node holding the headroom is
neither deleted as empty nor consolidated away."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from controllers.disruption.disruption_support import Scene

from karpy.cloudprovider import UnavailableOfferings
from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.controllers.capacitybuffer import VirtualPods, build_virtual_pods
from karpy.controllers.disruption import Candidate, Decision, build_candidate
from karpy.controllers.disruption._candidates import GRACEFUL
from karpy.controllers.disruption._whatif import consolidate
from karpy.controllers.inputs import SchedulingInputs
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.provisioning import Provisioner
from karpy.controllers.settings import Settings
from karpy.runtime import freeze
from karpy.runtime.telemetry import Metrics
from karpy.runtime.testing import FakeClient, FakeClock, FakeEventRecorder
from karpy.state import NODE_CLAIM, Cluster
from karpy.state import testing as t

CHUNK = {"metadata": {"labels": {"app": "web"}},
         "spec": {"containers": [{"name": "c", "image": "pause",
                                  "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                  "nodeName": "somewhere",
                  "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "x"}},
                              {"name": "cfg", "configMap": {"name": "y"}}]}}  # fmt: skip


def test_virtual_pods_carry_karpenters_names_and_annotations_and_no_volumes() -> None:
    pods = build_virtual_pods("team", "headroom", "uid-1", CHUNK, 2)
    assert [p.key for p in pods] == ["team/capacity-buffer-headroom-1",
                                     "team/capacity-buffer-headroom-2"]  # fmt: skip
    assert dict(pods[0].labels) == {"app": "web"}
    assert pods[0].requests["cpu"] == 1000
    assert pods[0].node_name == ""
    assert not pods[0].volume_requirements


def provisioner() -> tuple[Provisioner, Cluster, FakeClient, FakeEventRecorder, VirtualPods]:
    clock = FakeClock()
    cluster = Cluster(clock=clock)
    client = FakeClient()
    recorder = FakeEventRecorder()
    inputs = SchedulingInputs(
        cluster=cluster, cloud_provider=FakeCloudProvider(),
        unavailable_offerings=UnavailableOfferings(clock=clock),
        recorder=recorder, clock=clock, settings=Settings(),
        metrics=KarpenterMetrics(Metrics().meter("karpenter")),
    )  # fmt: skip
    prov = Provisioner(client=client, inputs=inputs, clock=clock)
    virtual = VirtualPods()
    prov.inputs.virtual_pods = virtual
    cluster.update_nodepool(freeze(t.nodepool("default")))
    return prov, cluster, client, recorder, virtual


def test_the_provisioner_buys_headroom_once_and_again_when_pods_take_it() -> None:
    prov, cluster, client, recorder, virtual = provisioner()
    virtual.update("team/headroom", build_virtual_pods("team", "headroom", "u", CHUNK, 2))
    assert asyncio.run(prov.provision()) == 0
    [claim] = client.objects(NODE_CLAIM)
    placed = virtual.placement("team/headroom")
    assert placed is not None and placed.new == 2
    # Nobody was nominated and no pod got an event: there are no such pods.
    assert not cluster.is_nominated("team/capacity-buffer-headroom-1")
    assert recorder.events == []
    # The in-flight NodeClaim holds the headroom: the next round buys nothing.
    asyncio.run(prov.provision())
    assert len(client.objects(NODE_CLAIM)) == 1
    placed = virtual.placement("team/headroom")
    assert placed is not None and placed.existing == 2 and placed.new == 0
    # Real pods that take every bit of that room: the headroom is bought again.
    requests = claim["spec"]["resources"]["requests"]
    cluster.update_pod(freeze(t.pod("real", cpu=requests["cpu"], memory="1Gi")))
    asyncio.run(prov.provision())
    assert len(client.objects(NODE_CLAIM)) >= 2


def candidate(scene: Scene, node: str) -> Candidate:
    state = scene.cluster.node_by_name(node)
    assert state is not None
    built = build_candidate(state, scene.snapshot(), GRACEFUL)
    assert isinstance(built, Candidate), built
    return built


def test_consolidation_keeps_the_node_that_holds_the_headroom() -> None:
    scene = Scene()
    scene.pool()
    scene.machine("busy", "m-4x")
    scene.machine("spare", "m-4x")
    scene.pod("a", "busy", cpu="3")
    spare = candidate(scene, "spare")
    without = scene.whatif()
    assert without.keeps_buffer_without([spare])
    deleted = consolidate(without, [spare])
    assert not isinstance(deleted, str) and deleted.decision is Decision.DELETE
    chunk = {**CHUNK, "spec": {**CHUNK["spec"], "volumes": []}}
    whatif = scene.whatif()
    buffered = type(whatif)(
        simulator=whatif.simulator, nodes=whatif.nodes, pending=whatif.pending,
        buffer=build_virtual_pods("team", "headroom", "u", chunk, 2),
    )
    # Two 1-CPU chunks do not fit the busy node's one free CPU: the spare must stay.
    assert not buffered.keeps_buffer_without([spare])
    outcome = consolidate(buffered, [spare])
    assert isinstance(outcome, str) or outcome.decision is not Decision.DELETE


def test_emptiness_keeps_the_empty_node_that_holds_the_headroom() -> None:
    from karpy.controllers.disruption import Budgets
    from karpy.controllers.disruption._emptiness import Emptiness
    from karpy.controllers.disruption._method import Context
    from karpy.runtime.testing import FakeClock

    scene = Scene()
    scene.pool()
    scene.machine("busy", "m-4x")
    scene.machine("spare", "m-4x")
    scene.pod("a", "busy", cpu="3")
    spare = candidate(scene, "spare")

    async def validate(command: Any, method: Any) -> Any:
        return command

    def evaluate(whatif: Any) -> list[Any]:
        context = Context(
            whatif=whatif, candidates=[spare],
            budgets=Budgets(reason="Empty", allowed={"default": 10},
                            remaining={"default": 10}),
            events=cast(Any, None), clock=FakeClock(), settings=Settings(), validate=validate,
        )  # fmt: skip
        return list(asyncio.run(Emptiness().compute(context)))

    [command] = evaluate(scene.whatif())
    assert [c.name for c in command.candidates] == ["spare"]
    whatif = scene.whatif()
    chunk = {**CHUNK, "spec": {**CHUNK["spec"], "volumes": []}}
    buffered = type(whatif)(
        simulator=whatif.simulator, nodes=whatif.nodes, pending=whatif.pending,
        buffer=build_virtual_pods("team", "headroom", "u", chunk, 2),
    )
    assert evaluate(buffered) == []
