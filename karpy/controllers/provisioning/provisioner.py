"""The provisioner: turns a batch of pending pods into NodeClaims.

One round (Karpenter's Provisioner.Reconcile):

1. wait for a batch (:class:`~karpy.controllers.provisioning.batcher.Batcher`), then for
   the cluster model to be synced;
2. gather the capacity that exists or is coming (nodes, launched NodeClaims, with the
   pods already nominated to them), then, from the shared
   :class:`~karpy.controllers.inputs.scheduling.SchedulingInputs`, the pods that need
   capacity -- provisionable and not nominated, plus pods on machines being deleted --
   each restricted to where its persistent volumes can be mounted;
3. build the simulator's input: the inputs' NodePool templates (ready NodePools in
   weight order with their instance types, limits and usage) and the DaemonSets'
   pods; solve;
4. record the decision (events, log lines, nominations onto existing capacity) and
   create one NodeClaim per planned node, nominating its pods to it.

The model is read in memory; the API is only written to (NodeClaims, Events).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from karpy.apis import NodePool
from karpy.apis.duration import format_go_duration
from karpy.controllers.inputs.scheduling import SchedulingInputs
from karpy.controllers.provisioning.batcher import Batcher
from karpy.controllers.provisioning.nodeclaims import instance_type_names, nodeclaim_manifest
from karpy.controllers.provisioning.pretty import truncated_list
from karpy.runtime import Client, Clock, Result, freeze
from karpy.scheduling import (
    NodeClaimPlan,
    Pod,
    ReservedOfferingError,
    Results,
    held_in_flight,
    reservation_label_keys,
)
from karpy.scheduling import resources as res
from karpy.scheduling.simulator import Simulator
from karpy.state import (
    NODE_CLAIM,
)

__all__ = ["PROVISIONED_REASON", "Provisioner"]

log = logging.getLogger("controller")

PROVISIONED_REASON = "provisioned"
"""The ``reason`` label of karpenter_nodeclaims_created_total for NodeClaims made here
(Karpenter's metrics.ProvisionedReason)."""

_WAIT_FOR_BATCH = 1.0
# Karpenter's pod controller re-triggers every still-pending pod every 10 s.
_RETRY_PENDING = 10.0


_SYNC_POLL = 0.05
_SYNC_WAIT = 30.0
_IMMEDIATELY = 0.001
_CREATE_CONCURRENCY = 32


class Provisioner:
    """The ``provisioner`` singleton (see the module docstring)."""

    name = "provisioner"

    def __init__(self, *, client: Client, inputs: SchedulingInputs, clock: Clock) -> None:
        self.client = client
        self.inputs = inputs
        """What each round schedules, shared with disruption, metrics and the tools."""
        self.cluster = inputs.cluster
        self.clock = clock
        self.settings = inputs.settings
        self.metrics = inputs.metrics
        self.batcher = Batcher(
            clock, idle=self.settings.batch_idle_duration, maximum=self.settings.batch_max_duration
        )
        self.events = inputs.events
        self._last_round = float("-inf")
        self._batch_waiting = False
        """A batch window closed and its round still waits for the model to sync."""
        self._zones: set[str] = set()
        """The zones of karpenter_scheduler_pending_pods_by_effective_zone_count set."""
        self._queue_labels: tuple[str, str] | None = None
        """The labels of the last solve's karpenter_scheduler_queue_depth series."""
        # NodePool name -> (the parsed NodePool, its hash): hashing the template costs
        # ~1 ms, once per NodePool version rather than once per NodeClaim.
        self._hashes: dict[str, tuple[NodePool, str]] = {}

    # -- triggering ----------------------------------------------------------------------

    def trigger(self, key: object) -> None:
        """Ask for a round (a pod or node ``key``; repeated keys in a window count once)."""
        self.batcher.trigger(key)

    def release(self, pod_keys: Sequence[str]) -> None:
        """Pods lost their nominations (their NodeClaim went away): provision again."""
        for key in pod_keys:
            self.batcher.trigger(key)

    # -- the loop ------------------------------------------------------------------------

    async def reconcile(self) -> Result:
        """Wait for a batch, then provision for it."""
        if not self._batch_waiting:
            if not await self.batcher.wait(_WAIT_FOR_BATCH):
                idle_for = self.clock.monotonic() - self._last_round
                if idle_for < _RETRY_PENDING or not self.inputs.has_pods():
                    return Result(requeue_after=_IMMEDIATELY)
            self._batch_waiting = True
        if not await self._wait_for_sync():
            # Keep the batch for when the model has caught up, and go straight back to
            # waiting for that: a fresh batch window on top would only add its length.
            return Result(requeue_after=_IMMEDIATELY)
        self._batch_waiting = False
        try:
            failed = await self.provision()
        except Exception:
            self.batcher.rearm()
            raise
        if failed:
            self.batcher.rearm()
        return Result(requeue_after=_IMMEDIATELY)

    async def _wait_for_sync(self) -> bool:
        """Wait (a bounded while) until the model has listed everything and can count
        every NodeClaim on its way: deciding earlier could buy capacity that is already
        coming (see :attr:`Cluster.synced_for_provisioning`)."""
        deadline = self.clock.monotonic() + _SYNC_WAIT
        while not self.cluster.synced_for_provisioning:
            if self.clock.monotonic() >= deadline:
                return False
            await self.clock.sleep(_SYNC_POLL)
        return True

    async def provision(self) -> int:
        """One round: schedule and create the NodeClaims. Returns how many failed."""
        results = await self.schedule()
        if results is None or not results.new_nodeclaims:
            return 0
        return await self.create_nodeclaims(results.new_nodeclaims)

    # -- scheduling ----------------------------------------------------------------------

    async def schedule(self) -> Results | None:
        """Simulate where the pods needing capacity go; None when there are none."""
        started = time.perf_counter()
        self._last_round = self.clock.monotonic()
        if not self.inputs.has_pods():
            return None
        # Capacity first, pods second: a pod that binds in between is then counted on
        # its node rather than provisioned for (under-provisioning heals next round,
        # over-provisioning costs money).
        nodes = self.cluster.existing_nodes()
        pending = self.inputs.pending_pods()
        deleting = self.inputs.moving_pods()
        pods = pending + deleting + self.inputs.buffer_pods()
        if not pods:
            self._record_zones({})
            return None
        log.debug(
            "computing scheduling decision for provisionable pod(s)",
            extra={"pending-pods": len(pending), "deleting-pods": len(deleting)},
        )
        templates = await self.inputs.templates()
        if not templates and not self.inputs.ready_pools():
            log.info("no nodepools found")
            # a verdict all the same: nowhere to go (Karpenter marks them failed too)
            self._mark_decisions(failed=self.inputs.real(pending), placed=())
            return None
        # Ready NodePools whose instance types were all filtered out still get a solve
        # (Karpenter builds its scheduler without templates): pods may fit existing and
        # in-flight capacity, and the rest are told why they cannot schedule.
        simulator = Simulator(
            templates, daemonsets=self.cluster.daemonset_pods(), options=self.inputs.options
        )
        keys = reservation_label_keys(it for t in templates for it in t.instance_types)
        # NodeClaims not launched yet hold reservation slots the cloud does not count
        in_flight = held_in_flight(self.cluster.unlaunched_nodeclaims(), keys) if keys else None
        # karpenter_scheduler_unfinished_work_seconds{controller, scheduling_id}: present
        # while the solve runs, its value the seconds since it began, read at scrape time.
        unfinished = self.metrics.scheduler_unfinished_work
        solve_labels = (self.name, str(uuid.uuid4()))
        solve_started = time.perf_counter()
        unfinished.labels(*solve_labels).set_function(
            lambda: time.perf_counter() - solve_started
        )
        try:
            results = simulator.solve(
                pods,
                nodes=nodes,
                namespaces=self.cluster.namespaces(),
                reservations_in_flight=in_flight,
                devices=self.cluster.devices.inputs(),
            )
        finally:
            unfinished.remove(*solve_labels)
        self._record_queue_depth(solve_labels, len(results.errors))
        if self.inputs.virtual_pods is not None:
            self.inputs.virtual_pods.observe(results)
        elapsed = time.perf_counter() - started
        self.metrics.scheduling_duration.record(elapsed, {"controller": self.name})
        if results.new_nodeclaims:
            log.info(
                "found provisionable pod(s)",
                extra={"Pods": truncated_list([p.key for p in pods]),
                       "duration": format_go_duration(elapsed)},
            )
        self._record(results)
        self._record_zones(results.pending_by_zone)
        self._mark_decisions(
            failed=self.inputs.real([e.pod for e in results.errors]),
            placed=self.inputs.real([
                *(p for plan in results.new_nodeclaims for p in plan.pods),
                *(p for node in results.existing_nodes for p in node.pods),
            ]),
        )
        return results

    def _record_queue_depth(self, labels: tuple[str, str], left: int) -> None:
        """karpenter_scheduler_queue_depth{controller, scheduling_id}: the pods the solve
        left in its queue, replacing the previous solve's series (Karpenter deletes the
        controller's series as a solve starts; karpy's solve runs without yielding, so no
        scrape could see it in between)."""
        gauge = self.metrics.scheduler_queue_depth
        if self._queue_labels is not None:
            gauge.remove(*self._queue_labels)
        gauge.labels(*labels).set(left)
        self._queue_labels = labels

    def _record_zones(self, pending_by_zone: Mapping[str, int]) -> None:
        """karpenter_scheduler_pending_pods_by_effective_zone_count for this round: the
        zones no pod is held to any more are dropped, as Karpenter drops them."""
        gauge = self.metrics.scheduler_pending_pods_by_zone
        for zone in self._zones.difference(pending_by_zone):
            gauge.remove(self.name, zone)
        for zone, count in pending_by_zone.items():
            gauge.labels(self.name, zone).set(count)
        self._zones = set(pending_by_zone)

    def _mark_decisions(self, *, failed: Sequence[Pod], placed: Sequence[Pod]) -> None:
        """Tell the model which unbound pods this round decided about (the pod latency
        metrics' starting points); time the first decision on each pod since it was
        first seen. Pods still bound (moving off a deleting node) are not waiting on
        karpy to be placed: their bind lies in the past."""
        waits = self.cluster.pod_scheduling.mark_decisions(
            self.clock.now(),
            failed=[p.key for p in failed if not p.node_name],
            placed=[p.key for p in placed if not p.node_name],
        )
        for wait in waits:
            self.metrics.pods_scheduling_decision_duration.record(wait)

    def _record(self, results: Results) -> None:
        """Events and log lines for the decision; nominations onto existing capacity."""
        deferred = results.deferred
        if deferred:
            log.debug(
                "deferring scheduling decision for provisionable pod(s) to future simulation "
                "due to limited reserved offering capacity",
                extra={"Pods": truncated_list([e.pod.key for e in deferred])},
            )
        # a pod waiting for a reservation's slot is not unschedulable, and a
        # CapacityBuffer's virtual pod is no pod at all
        unschedulable = [
            e for e in results.errors
            if not isinstance(e.reason, ReservedOfferingError) and self.inputs.real([e.pod])
        ]
        self.metrics.scheduler_unschedulable_pods.set(
            len(unschedulable), {"controller": self.name}
        )
        for error in unschedulable:
            if self.events.failed_to_schedule(error.pod, error.reason):
                log.error(
                    "could not schedule pod",
                    extra={"Pod": {"name": error.pod.name, "namespace": error.pod.namespace},
                           "error": error.reason},
                )
        ttl = self.settings.pod_nomination_ttl
        for placement in results.existing_nodes:
            real = self.inputs.real(placement.pods)
            self.cluster.nominate(real, placement.node, ttl=ttl)
            state = self.cluster.node_by_name(placement.node)
            claim = state.nodeclaim_name if state is not None else placement.node
            node = state.node_name if state is not None else ""
            for pod in real:
                self.events.nominated(pod, nodeclaim=claim, node=node)
        new_pods = sum(len(plan.pods) for plan in results.new_nodeclaims)
        if new_pods == 0:
            return
        log.info(
            "computed new nodeclaim(s) to fit pod(s)",
            extra={"nodeclaims": len(results.new_nodeclaims), "pods": new_pods},
        )
        narrowed = results.narrowed_nodeclaims
        if narrowed:
            # karpy's own line: the cost-improvement stage gave up zones on these
            # NodeClaims to take pods moved onto them (launch flexibility for price)
            log.info(
                "narrowed nodeclaim(s) to fewer zones to lower their price",
                extra={"nodeclaims": narrowed, "of": len(results.new_nodeclaims)},
            )
        existing = [p for p in results.existing_nodes if p.pods]
        if existing:
            log.info(
                "computed unready node(s) will fit pod(s)",
                extra={"nodes": len(existing), "pods": sum(len(p.pods) for p in existing)},
            )

    # -- creating ------------------------------------------------------------------------

    async def create_nodeclaims(self, plans: Sequence[NodeClaimPlan]) -> int:
        """Create a NodeClaim per plan, concurrently. Returns how many failed."""
        gate = asyncio.Semaphore(_CREATE_CONCURRENCY)

        async def create(plan: NodeClaimPlan) -> str | None:
            async with gate:
                return await self.create(plan)

        outcomes = await asyncio.gather(*(create(p) for p in plans), return_exceptions=True)
        failed = 0
        for plan, outcome in zip(plans, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    raise outcome
                failed += 1
                log.error(
                    "creating nodeclaim",
                    exc_info=outcome,
                    extra={"NodePool": {"name": plan.nodepool}},
                )
            elif outcome is None:
                failed += 1
        return failed

    async def create(self, plan: NodeClaimPlan, *, reason: str = PROVISIONED_REASON) -> str | None:
        """Create the NodeClaim for ``plan`` and nominate its pods; its name, or None
        when its NodePool is gone or already over its limits. ``reason`` labels
        karpenter_nodeclaims_created_total (disruption passes its own)."""
        entry = self.cluster.nodepool(plan.nodepool)
        if entry is None or entry.model is None:
            return None
        limits = res.parse_resource_list((entry.raw.get("spec") or {}).get("limits"))
        over = _exceeded(limits, self.cluster.nodepool_usage(entry.name))
        for shared in self.cluster.shared_limits(entry.name):
            if over:
                break
            over = _exceeded(shared.limits, shared.usage)
            if over:
                over = f"ClusterLimit {shared.name}: {over}"
        if over:
            log.error(
                "creating nodeclaim", extra={"NodePool": {"name": entry.name}, "error": over}
            )
            return None
        manifest = nodeclaim_manifest(
            plan, entry.model, uid=entry.uid, nodepool_hash=self._hash(entry.name, entry.model)
        )
        created = await self.client.create(NODE_CLAIM, manifest)
        name = str(created["metadata"]["name"])
        # Into the model now, not when the watch delivers it: the next round must see
        # this capacity (and the pods nominated to it) even if the watch lags.
        self.cluster.nodeclaim_created(freeze(created))
        real = self.inputs.real(plan.pods)
        self.cluster.nominate(real, name, ttl=self.settings.pod_nomination_ttl)
        log.info(
            "created nodeclaim",
            extra={
                "NodePool": {"name": entry.name},
                "NodeClaim": {"name": name},
                "requests": _requests_of(created),
                "instance-types": truncated_list(instance_type_names(created)),
            },
        )
        self.metrics.nodeclaims_created.add(
            1, {"reason": reason, "nodepool": entry.name,
                "min_values_relaxed": str(plan.min_values_relaxed).lower()},
        )
        for pod in real:
            self.events.nominated(pod, nodeclaim=name)
        return name


    def _hash(self, name: str, nodepool: NodePool) -> str:
        cached = self._hashes.get(name)
        if cached is None or cached[0] is not nodepool:  # parsed anew on every change
            cached = self._hashes[name] = (nodepool, nodepool.hash())
        return cached[1]


def _requests_of(nodeclaim: dict[str, Any]) -> dict[str, Any]:
    spec = nodeclaim.get("spec") or {}
    return dict((spec.get("resources") or {}).get("requests") or {})


def _exceeded(limits: Mapping[str, int], usage: Mapping[str, int]) -> str | None:
    """Karpenter's Limits.ExceededBy: the first resource whose usage is over its limit."""
    for name, limit in sorted(limits.items()):
        used = usage.get(name, 0)
        if used > limit:
            return (
                f"{name} resource usage of {res.format_quantity(name, used)} exceeds limit "
                f"of {res.format_quantity(name, limit)}"
            )
    return None

