"""A scene for disruption unit tests: a cluster model with managed machines, the pods on
them, NodePools and a small catalogue; snapshots and what-if views built from it the
way the disruption controller builds them, and :func:`decide`, which runs the real
disruption controller's methods over the scene (validation skipped, as Karpenter's
suite does with its no-op validator)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from karpy.controllers.disruption import (
    Command,
    Decision,
    DisruptionController,
    PdbLimits,
    PoolCatalogue,
    Snapshot,
    WhatIf,
)
from karpy.controllers.disruption._consolidation import settling_machines
from karpy.controllers.disruption._events import DisruptionEvents
from karpy.controllers.disruption._method import Method
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.settings import Settings
from karpy.runtime import freeze
from karpy.runtime.telemetry import Metrics
from karpy.runtime.testing import FakeClock, FakeEventRecorder
from karpy.scheduling import (
    InstanceType,
    NodePoolTemplate,
    Offering,
    Pod,
    SchedulerOptions,
    Simulator,
)
from karpy.scheduling import resources as res
from karpy.state import Cluster
from karpy.state import testing as t

ZONES = ("zone-a", "zone-b")
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def instance_type(name: str, cpu: int, memory_gib: int, *, price: float,
                  spot_price: float | None = None) -> InstanceType:
    """A type with on-demand (and, if priced, spot) offerings in both zones."""
    offerings = [Offering(zone=z, capacity_type="on-demand", price=price) for z in ZONES]
    if spot_price is not None:
        offerings += [Offering(zone=z, capacity_type="spot", price=spot_price) for z in ZONES]
    return InstanceType.build(
        name,
        capacity={res.CPU: cpu * 1000, res.MEMORY: memory_gib * t.GIB, res.PODS: 110},
        offerings=offerings,
    )


def catalogue(spot: bool = False) -> list[InstanceType]:
    """Sizes 1..32 vCPU at 4 GiB per vCPU, $0.05 per vCPU-hour (spot 30 %)."""
    return [
        instance_type(f"m-{cpu}x", cpu, 4 * cpu, price=0.05 * cpu,
                      spot_price=0.015 * cpu if spot else None)
        for cpu in (1, 2, 4, 8, 16, 32)
    ]


def consolidatable(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` (a NodeClaim) with Consolidatable=True."""
    obj["status"]["conditions"].append(
        {"type": "Consolidatable", "status": "True", "reason": "Consolidatable",
         "lastTransitionTime": "2026-11-23T11:00:00Z"}
    )
    return obj


@dataclass
class Scene:
    """Machines, pods and NodePools in a Cluster model (see the module docstring)."""

    types: list[InstanceType] = field(default_factory=catalogue)
    cluster: Cluster = field(default_factory=Cluster)
    pods: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    pdbs: list[dict[str, Any]] = field(default_factory=list)
    pools: dict[str, dict[str, Any]] = field(default_factory=dict)
    buffer: list[Pod] = field(default_factory=list)
    """CapacityBuffer virtual pods (the provisioner's ``buffer_pods``)."""
    now: datetime = NOW
    """The wall-clock time snapshots see (do-not-disrupt durations, budget schedules)."""

    def pool(self, name: str = "default", *,
             requirements: Sequence[Mapping[str, Any]] = (), **disruption: Any) -> dict[str, Any]:
        """A ready NodePool, with ``disruption`` fields merged into its spec."""
        obj = t.nodepool(name, requirements=requirements)
        obj["spec"]["disruption"] = {"consolidateAfter": "0s",
                                     "consolidationPolicy": "WhenEmptyOrUnderutilized",
                                     **disruption}
        self.pools[name] = obj
        self.cluster.update_nodepool(freeze(obj))
        return obj

    def machine(self, name: str, type_name: str, *, pool: str = "default",
                zone: str = "zone-a", capacity_type: str | None = "on-demand",
                consolidatable_: bool = True, node_annotations: Mapping[str, str] | None = None,
                drifted: bool = False, grace: str | None = None,
                cpu: str | None = None, memory: str | None = None,
                ready: bool = True, deleting: bool = False, initialized: bool = True,
                node_labels: Mapping[str, str] | None = None,
                drifted_at: str = "2026-11-23T10:00:00Z",
                last_pod_event: str | None = None) -> None:
        """A launched, registered, initialized machine (Node + NodeClaim).

        ``type_name`` need not be in the catalogue (give ``cpu`` and ``memory`` then);
        ``capacity_type=None`` leaves the capacity-type label off. ``consolidatable_=False``
        is what Karpenter's clock makes it: a pod event just now (``last_pod_event``,
        default the scene's ``now``), so the node is also under consolidateAfter."""
        it = next((i for i in self.types if i.name == type_name), None)
        labels = {"node.kubernetes.io/instance-type": type_name,
                  "topology.kubernetes.io/zone": zone}
        if capacity_type is not None:
            labels["karpenter.sh/capacity-type"] = capacity_type
        labels.update(node_labels or {})
        if it is not None:
            cpu = cpu or str(it.capacity[res.CPU] // 1000)
            memory = memory or f"{it.capacity[res.MEMORY] // t.GIB}Gi"
        assert cpu is not None and memory is not None, "an unknown type needs cpu and memory"
        provider_id = f"test:///{name}"
        claim = t.nodeclaim(f"{name}-claim", nodepool=pool, provider_id=provider_id,
                            node_name=name, labels=labels, cpu=cpu, memory=memory,
                            registered=True, initialized=initialized)
        if consolidatable_ and initialized:
            consolidatable(claim)
        elif initialized:
            claim["status"]["lastPodEventTime"] = last_pod_event or self.now.strftime(
                "%Y-%m-%dT%H:%M:%SZ")
        if drifted:
            claim["status"]["conditions"].append(
                {"type": "Drifted", "status": "True", "reason": "NodePoolDrifted",
                 "lastTransitionTime": drifted_at})
        if grace:
            claim["spec"]["terminationGracePeriod"] = grace
        node = t.node(name, provider_id=provider_id, nodepool=pool, labels=labels,
                      cpu=cpu, memory=memory, initialized=initialized)
        node["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
        if deleting:
            claim["metadata"]["deletionTimestamp"] = "2026-11-23T11:59:00Z"
        if node_annotations:
            node["metadata"]["annotations"] = dict(node_annotations)
        self.cluster.update_nodeclaim(freeze(claim))
        self.cluster.update_node(freeze(node))
        self.pods.setdefault(name, [])

    def pod(self, name: str, node: str, *, cpu: str = "1", memory: str = "1Gi",
            annotations: Mapping[str, str] | None = None,
            affinity: Mapping[str, Any] | None = None,
            spread: Sequence[Mapping[str, Any]] = (), **kwargs: Any) -> dict[str, Any]:
        """A running pod bound to ``node``."""
        obj = t.pod(name, node_name=node, cpu=cpu, memory=memory, **kwargs)
        if annotations:
            obj["metadata"]["annotations"] = dict(annotations)
        if affinity:
            obj["spec"]["affinity"] = dict(affinity)
        if spread:
            obj["spec"]["topologySpreadConstraints"] = [dict(c) for c in spread]
        self.cluster.update_pod(freeze(obj))
        self.pods.setdefault(node, []).append(obj)
        return obj

    def unmanaged(self, name: str, *, cpu: str, memory: str) -> None:
        """A Node karpy does not manage (no NodeClaim, no NodePool)."""
        self.cluster.update_node(freeze(t.node(name, provider_id=f"test:///{name}",
                                               cpu=cpu, memory=memory)))
        self.pods.setdefault(name, [])

    def pending(self, name: str, **kwargs: Any) -> None:
        """A pending, unschedulable pod."""
        self.cluster.update_pod(freeze(t.pod(name, **kwargs)))

    def snapshot(self, *, queued: Sequence[str] = ()) -> Snapshot:
        """The disruption controller's snapshot of the scene."""
        pools = {}
        for entry in self.cluster.nodepools():
            pools[entry.name] = PoolCatalogue(entry, {it.name: it for it in self.types})
        return Snapshot(
            now=self.now, pools=pools, pdbs=PdbLimits(self.pdbs),
            pods_on=lambda node: self.pods.get(node, []),
            queued=lambda pid: pid in queued,
            nominated=self.cluster.is_node_nominated,
        )

    def whatif(self, options: SchedulerOptions | None = None) -> WhatIf:
        """The what-if view the controller would build (with the provisioner's
        scheduler ``options``)."""
        templates = [
            NodePoolTemplate.from_nodepool_dict(
                entry.raw, self.types, usage=self.cluster.nodepool_usage(entry.name),
                shared_limits=self.cluster.shared_limits(entry.name))
            for entry in self.cluster.nodepools()
        ]
        pending = [self.cluster.scheduling_pod(p) for p in self.cluster.provisionable_pods()]
        return WhatIf(simulator=Simulator(templates, options=options),
                      nodes=tuple(self.cluster.existing_nodes()),
                      pending=tuple(pending), deleting=tuple(self.cluster.reschedulable_pods()),
                      namespaces={},
                      settling=settling_machines(self.cluster.nodes(), self.cluster.nodepool,
                                                 now=self.now),
                      buffer=tuple(self.buffer))


class _NoQueue:
    """No command is running."""

    def has(self, _provider_id: str) -> bool:
        return False


class SceneController(DisruptionController):
    """The disruption controller reading a :class:`Scene` instead of the cache and the
    provisioner (everything else — candidates, budgets, methods — is the real code)."""

    def __init__(self, scene: Scene, settings: Settings | None = None,
                 options: SchedulerOptions | None = None) -> None:
        clock = FakeClock(start=NOW)
        self.recorder = FakeEventRecorder()
        self.registry = Metrics()
        super().__init__(
            client=None, cache=None, cluster=scene.cluster,  # type: ignore[arg-type]
            scheduling=None, cloud_provider=None, queue=_NoQueue(),  # type: ignore[arg-type]
            events=DisruptionEvents(self.recorder, clock),
            clock=clock, settings=settings or Settings(),
            metrics=KarpenterMetrics(self.registry.meter("karpenter")),
        )
        self.scene = scene
        self.options = options
        self.clock = clock

    async def snapshot(self) -> Snapshot:
        snapshot = self.scene.snapshot()
        snapshot.moving = self._moving_pod  # the controller's own volume topology
        return snapshot

    async def whatif(self) -> WhatIf:
        return self.scene.whatif(self.options)

    async def run(self, method: Method) -> list[Command]:
        """One method's commands, unvalidated."""
        context = await self.context(method)

        async def accept(command: Command, _method: Method) -> Command:
            return command

        context.validate = accept
        if not context.candidates:
            return []
        return [c for c in await method.compute(context) if c.decision is not Decision.NOOP]

    async def run_validated(
        self, method: Method, during: Callable[[], None] = lambda: None,
        *, wait: float = 31.0,
    ) -> tuple[bool, list[Command]]:
        """One method's commands through the real validation step, as Karpenter's suite
        runs a controller with the real validator: once the method blocks on the
        validation delay, ``during`` changes the scene (not called if the method did
        not wait), then the clock moves ``wait``
        seconds. Returns (whether the method was still blocked before the clock moved,
        its commands)."""
        context = await self.context(method)
        if not context.candidates:
            return False, []
        task = asyncio.ensure_future(method.compute(context))
        for _ in range(1000):  # bounded: a method that never waits fails the test below
            if self.clock.pending_timers() or task.done():
                break
            await asyncio.sleep(0)
        blocked = not task.done()
        if blocked:
            during()
        await self.clock.step(wait)
        commands = await asyncio.wait_for(task, timeout=10)
        return blocked, [c for c in commands if c.decision is not Decision.NOOP]

    async def decide_validated(
        self, during: Callable[[], None] = lambda: None,
    ) -> tuple[bool, list[Command]]:
        """One pass with the real validation step (the methods in Karpenter's order; the
        first with commands wins): ``during`` runs once, at the first validation wait.
        Returns (whether any method waited, the commands)."""
        ran = False

        def once() -> None:
            nonlocal ran
            if not ran:
                ran = True
                during()

        waited = False
        for method in self.methods:
            blocked, commands = await self.run_validated(method, once)
            waited = waited or blocked
            if commands:
                return waited, commands
        return waited, []

    def metric(self, name: str, **labels: str) -> float | None:
        """The value of a sample of metric ``name`` with ``labels`` (None if absent)."""
        for family in self.registry.registry.collect():
            for sample in family.samples:
                if sample.name == name and all(
                    sample.labels.get(k) == v for k, v in labels.items()
                ):
                    return float(sample.value)
        return None

    def messages(self, reason: str) -> list[str]:
        """The distinct messages of the events recorded with ``reason`` (each is
        recorded on the Node and on the NodeClaim)."""
        return list(dict.fromkeys(e.message for e in self.recorder.events if e.reason == reason))


async def decide(scene: Scene, settings: Settings | None = None,
                 options: SchedulerOptions | None = None) -> list[Command]:
    """What one disruption pass would start: the commands of the first method (in
    Karpenter's order) that has any."""
    controller = SceneController(scene, settings, options)
    for method in controller.methods:
        commands = await controller.run(method)
        if commands:
            return commands
    return []
