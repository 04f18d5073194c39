"""The ``disruption`` controller: every 10 s, find nodes to remove and start one command.

A pass (Karpenter's disruption.Controller.Reconcile):

1. wait until the cluster model is synced;
2. take the disruption marks (taint, ``DisruptionReason``) off every machine that is
   not part of a running command and not being deleted — what a crash mid-command
   leaves behind;
3. try the methods in Karpenter's order — Emptiness, StaticDrift, Drift, multi-node,
   then single-node consolidation — and start the commands of the first that has any.

Each method sees fresh candidates (:func:`~._candidates.build_candidate`; blocked
nodes get a DisruptionBlocked event), the budgets for its reason, and a what-if view
of the cluster built from the scheduling inputs the provisioner uses (model, NodePool
templates, instance types, pending and moving pods). Emptiness and consolidation
commands are checked by the controller's :class:`~._validation.Validator` before they
start: by default, after ``Settings.disruption_validation_delay``, re-built from fresh
state and dropped if any candidate, budget or the simulation changed; a read-only view
injects one that accepts at once.

StaticDrift (``_staticdrift``) serves static NodePools (``spec.replicas``): it replaces
their drifted nodes one for one, as Karpenter's StaticDrift does.
"""

from __future__ import annotations

import builtins
import dataclasses
import logging
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from karpy.apis.taints import has_disrupted_taint
from karpy.apis.v1.nodepool import DisruptionReason
from karpy.cloudprovider import CloudProvider
from karpy.controllers.disruption._budgets import Budgets, disruption_budgets
from karpy.controllers.disruption._candidates import (
    Candidate,
    PoolCatalogue,
    Snapshot,
    build_candidate,
)
from karpy.controllers.disruption._command import Command, Decision
from karpy.controllers.disruption._consolidation import pool_totals, settling_machines
from karpy.controllers.disruption._drift import Drift
from karpy.controllers.disruption._emptiness import Emptiness
from karpy.controllers.disruption._events import DisruptionEvents
from karpy.controllers.disruption._marks import (
    has_disruption_reason,
    set_disrupted_taint,
    set_disruption_reason,
)
from karpy.controllers.disruption._method import Context, Method
from karpy.controllers.disruption._multinode import MultiNodeConsolidation
from karpy.controllers.disruption._pdb import PdbLimits
from karpy.controllers.disruption._queue import OrchestrationQueue
from karpy.controllers.disruption._repair import Repair
from karpy.controllers.disruption._singlenode import SingleNodeConsolidation
from karpy.controllers.disruption._staticdrift import StaticDrift
from karpy.controllers.disruption._validation import FreshStateValidator, Validator
from karpy.controllers.disruption._whatif import WhatIf
from karpy.controllers.inputs import SchedulingInputs
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.nodehealth.policy import RepairPolicyMatcher
from karpy.controllers.settings import Settings
from karpy.controllers.surge import surging_pods
from karpy.runtime import Client, Clock, Kind, Object, Result, errors, kinds
from karpy.runtime.indexes import INDEX_NODE_NAME
from karpy.scheduling import Pod, Simulator
from karpy.state import Cluster, VolumeError
from karpy.state.pods import is_evictable

__all__ = ["CacheReader", "DisruptionController"]

log = logging.getLogger("controller")

_NOT_SYNCED_RETRY = 1.0
_IMMEDIATELY = 0.001


class CacheReader(Protocol):
    """What the controller reads from the manager's cache besides the model (PDBs,
    pods by node)."""

    def list(self, kind: Kind) -> builtins.list[Object]:
        """Every cached object of ``kind``."""
        ...

    def by_index(self, kind: Kind, index: str, value: str) -> builtins.list[Object]:
        """Cached objects of ``kind`` whose ``index`` holds ``value``."""
        ...


class DisruptionController:
    """The ``disruption`` singleton (see the module docstring)."""

    name = "disruption"

    def __init__(
        self,
        *,
        client: Client,
        cache: CacheReader,
        cluster: Cluster,
        scheduling: SchedulingInputs,
        cloud_provider: CloudProvider,
        queue: OrchestrationQueue,
        events: DisruptionEvents,
        clock: Clock,
        settings: Settings,
        metrics: KarpenterMetrics,
        validator: Validator | None = None,
    ) -> None:
        self._client = client
        self._cache = cache
        self._cluster = cluster
        self._scheduling = scheduling
        self._provider = cloud_provider
        self.queue = queue
        self._events = events
        self._clock = clock
        self._settings = settings
        self._metrics = metrics
        self.validator: Validator = validator or FreshStateValidator(
            self, clock=clock, settings=settings, metrics=metrics
        )
        """Re-checks each emptiness and consolidation command before it runs."""
        methods: list[Method] = [
            Emptiness(), StaticDrift(cluster), Drift(), MultiNodeConsolidation(),
            SingleNodeConsolidation(),
        ]
        gates = settings.feature_gates
        if gates.node_repair and not settings.legacy_node_repair:
            # Repair goes first: fixing a fault outranks any rebalance (Karpenter
            # v1.15.0 NewMethods). A bad policy set stops start-up, naming the policy.
            matcher = RepairPolicyMatcher(cloud_provider.repair_policies())
            methods.insert(0, Repair(matcher=matcher, clock=clock, events=events,
                                     nodes=cluster.nodes))
        self.methods: tuple[Method, ...] = tuple(methods)

    # -- the loop ------------------------------------------------------------------------

    async def reconcile(self) -> Result:
        """One pass (see the module docstring)."""
        if not self._cluster.synced:
            return Result(requeue_after=_NOT_SYNCED_RETRY)
        try:
            await self._clear_stale_marks()
        except errors.Conflict:
            return Result(requeue=True)
        for method in self.methods:
            started = time.perf_counter()
            try:
                commands = await self._evaluate(method)
            finally:
                self._metrics.disruption_evaluation_duration.record(
                    time.perf_counter() - started,
                    {"method": method.reason.lower(),
                     "consolidation_type": method.consolidation_type},
                )
            if commands:
                for command in commands:
                    await self.queue.start(command)
                return Result(requeue_after=_IMMEDIATELY)
        return Result(requeue_after=self._settings.disruption_poll_period)

    async def _clear_stale_marks(self) -> None:
        now = self._clock.now()
        for state in self._cluster.nodes():
            if self.queue.has(state.provider_id) or state.marked_for_deletion:
                continue
            if state.node is not None and has_disrupted_taint(state.node) and state.managed:
                await set_disrupted_taint(self._client, state.node, False)
            if has_disruption_reason(state.nodeclaim):
                assert state.nodeclaim is not None
                await set_disruption_reason(self._client, state.nodeclaim, None, now)

    # -- one method ----------------------------------------------------------------------

    async def _evaluate(self, method: Method) -> Sequence[Command]:
        context = await self.context(method)
        self._metrics.disruption_eligible_nodes.set(
            len(context.candidates), {"reason": method.reason.lower()}
        )
        if not context.candidates:
            return []
        commands = await method.compute(context)
        return [c for c in commands if c.decision is not Decision.NOOP]

    async def snapshot(self) -> Snapshot:
        """The pools (with instance types), PDBs and pod lookups of this moment."""
        pools: dict[str, PoolCatalogue] = {}
        for entry in self._cluster.nodepools():
            if entry.model is None:
                continue
            try:
                types = await self._scheduling.instance_types.get(entry)
            except Exception as exc:  # a provider hiccup skips the pool for this pass
                log.error("failed listing instance types",
                          extra={"nodepool": entry.name, "error": str(exc)})
                continue
            if types:
                pools[entry.name] = PoolCatalogue(entry, {it.name: it for it in types})
        now = self._clock.now()
        pdbs = PdbLimits(self._cache.list(kinds.POD_DISRUPTION_BUDGET))
        return Snapshot(
            now=now,
            pools=pools,
            pdbs=pdbs,
            pods_on=lambda node: (
                self._cache.by_index(kinds.POD, INDEX_NODE_NAME, node) if node else []
            ),
            surging=await self._surging(pdbs, now),
            queued=self.queue.has,
            nominated=self._cluster.is_node_nominated,
            moving=self._moving_pod,
        )

    async def _surging(self, pdbs: PdbLimits, now: datetime) -> frozenset[str]:
        """The PDB-held pods that opted in to surge before evict and can surge."""
        if not pdbs:
            return frozenset()  # nothing is held: skip walking every bound pod
        raw = {entry.name: entry.raw for entry in self._cluster.nodepools()}
        pods = [
            (pod, raw.get(state.nodepool))
            for state in self._cluster.nodes() if state.node_name
            for pod in self._cache.by_index(kinds.POD, INDEX_NODE_NAME, state.node_name)
        ]
        return await surging_pods(
            self._client, pods, blocked=lambda p: is_evictable(p, now) and bool(pdbs.blocking(p)))

    def _moving_pod(self, pod: Pod) -> Pod:
        """``pod`` restricted to where its volumes can be mounted once it moves; as it is
        if they cannot be resolved (it still needs room; the provisioner's moving pods
        log the same error)."""
        try:
            return self._cluster.with_volume_topology(pod, bound=True)
        except VolumeError as exc:
            log.error("failed getting volume topology requirements",
                      extra={"Pod": {"name": pod.name, "namespace": pod.namespace},
                             "error": str(exc)})
            return pod

    async def whatif(self) -> WhatIf:
        """The cluster as a what-if simulation sees it now."""
        templates = await self._scheduling.templates()
        simulator = Simulator(
            templates, daemonsets=self._cluster.daemonset_pods(),
            # Karpenter's disruption simulates with reserved-capacity fallback: a
            # candidate's pod that finds a reservation full goes on-demand or spot
            # rather than making the command fail.
            options=dataclasses.replace(
                self._scheduling.options, reserved_offering_mode="Fallback"
            ),
        )
        return WhatIf(
            simulator=simulator,
            nodes=tuple(self._cluster.existing_nodes()),
            pending=tuple(self._scheduling.pending_pods()),
            deleting=tuple(self._scheduling.moving_pods()),
            namespaces=dict(self._cluster.namespaces()),
            settling=settling_machines(
                self._cluster.nodes(), self._cluster.nodepool, now=self._clock.now()
            ),
            buffer=tuple(self._scheduling.buffer_pods()),
        )

    def candidates(
        self, method: Method, snapshot: Snapshot, *, record: bool = True
    ) -> tuple[list[Candidate], list[Candidate]]:
        """(every candidate of the method's class, those the method wants)."""
        everything: list[Candidate] = []
        wanted: list[Candidate] = []
        for state in self._cluster.nodes():
            if not state.managed:
                continue
            built = build_candidate(state, snapshot, method.disruption_class)
            if isinstance(built, list):
                if built and record and state.nodeclaim is not None:
                    self._events.blocked(state.node, state.nodeclaim, built[0])
                continue
            everything.append(built)
            verdict = method.should_disrupt(built)
            if isinstance(verdict, str):
                if record:
                    self._events.unconsolidatable(built.node, built.nodeclaim, verdict)
            elif verdict:
                wanted.append(built)
        return everything, wanted

    def budgets(self, reason: DisruptionReason, *, record: bool = True) -> Budgets:
        """The budgets for ``reason`` now (gauges and blocked-NodePool events on record)."""
        budgets = disruption_budgets(
            self._cluster.nodepools(), self._cluster.nodes(), reason, self._clock.now()
        )
        if record:
            for pool, allowed in budgets.allowed.items():
                labels = {"nodepool": pool, "reason": reason}
                self._metrics.nodepool_allowed_disruptions.set(allowed, labels)
                count = budgets.counts.get(pool)
                self._metrics.nodepool_nodes_consuming_budgets.set(
                    count.disrupting if count else 0, labels
                )
            for pool in budgets.blocked():
                entry = self._cluster.nodepool(pool)
                if entry is not None:
                    self._events.nodepool_blocked(entry.raw, reason)
        return budgets

    async def context(self, method: Method) -> Context:
        """Everything ``method`` needs for one evaluation."""
        snapshot = await self.snapshot()
        everything, wanted = self.candidates(method, snapshot)
        return Context(
            whatif=await self.whatif() if wanted else _EMPTY_WHATIF,
            candidates=wanted,
            budgets=self.budgets(method.reason),
            events=self._events,
            clock=self._clock,
            settings=self._settings,
            validate=self.validator.validate,
            all_candidates=everything,
            pool_totals=pool_totals(everything, self._cluster.nodes(), snapshot),
            metrics=self._metrics,
        )

    def is_node_nominated(self, provider_id: str) -> bool:
        """Whether pods were nominated to this machine (the validator re-reads it)."""
        return self._cluster.is_node_nominated(provider_id)


_EMPTY_WHATIF = WhatIf(simulator=Simulator(()), nodes=())

