"""The provisioner: turns a batch of pending pods into NodeClaims.

One round (Karpenter's Provisioner.Reconcile):

1. wait for a batch (:class:`~karpy.controllers.provisioning.batcher.Batcher`), then for
   the cluster model to be synced;
2. gather the pods that need capacity -- provisionable and not nominated, plus pods on
   machines being deleted -- each restricted to where its persistent volumes can be
   mounted (a pod whose claim or StorageClass is missing is left out, with an event),
   and the capacity that exists or is coming (nodes, launched NodeClaims, with the
   pods already nominated to them);
3. build the simulator's input: ready NodePools in weight order with their instance
   types (cached per generation, unavailable offerings masked), limits and usage, and
   the DaemonSets' pods; solve;
4. record the decision (events, log lines, nominations onto existing capacity) and
   create one NodeClaim per planned node, nominating its pods to it.

The model is read in memory; the API is only written to (NodeClaims, Events).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from karpy.apis import NodePool
from karpy.apis.duration import format_go_duration
from karpy.apis.labels import LABEL_NODEPOOL
from karpy.cloudprovider import CloudProvider, UnavailableOfferings
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.provisioning.batcher import Batcher
from karpy.controllers.provisioning.events import NodePoolEvents, PodEvents
from karpy.controllers.provisioning.instancetypes import InstanceTypeCache
from karpy.controllers.provisioning.nodeclaims import instance_type_names, nodeclaim_manifest
from karpy.controllers.provisioning.pretty import truncated_list
from karpy.controllers.provisioning.virtualpods import VirtualPodSource
from karpy.controllers.settings import Settings
from karpy.runtime import Client, Clock, EventRecorder, Result, freeze
from karpy.scheduling import (
    NodeClaimPlan,
    NodePoolTemplate,
    Pod,
    ReservedOfferingError,
    Results,
    held_in_flight,
    reservation_label_keys,
)
from karpy.scheduling import resources as res
from karpy.scheduling.filtering import filtered_out
from karpy.scheduling.reservations import without_reserved
from karpy.scheduling.simulator import SchedulerOptions, Simulator
from karpy.state import (
    NODE_CLAIM,
    Cluster,
    NodePoolEntry,
    OverlayStore,
    VolumeError,
)

__all__ = ["PROVISIONED_REASON", "Provisioner"]

log = logging.getLogger("controller")

PROVISIONED_REASON = "provisioned"
"""The ``reason`` label of karpenter_nodeclaims_created_total for NodeClaims made here
(Karpenter's metrics.ProvisionedReason)."""

_DRA_UNSUPPORTED = (
    "pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter"
)
_WAIT_FOR_BATCH = 1.0
# Karpenter's pod controller re-triggers every still-pending pod every 10 s.
_RETRY_PENDING = 10.0


def has_dra_requirements(pod: Mapping[str, Any] | None) -> bool:
    """Whether ``pod`` references a ResourceClaim, itself or in any container
    (Karpenter's HasDRARequirements)."""
    spec = (pod or {}).get("spec") or {}
    if spec.get("resourceClaims"):
        return True
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    return any(((c.get("resources") or {}).get("claims")) for c in containers)
_SYNC_POLL = 0.05
_SYNC_WAIT = 30.0
_IMMEDIATELY = 0.001
_CREATE_CONCURRENCY = 32


class Provisioner:
    """The ``provisioner`` singleton (see the module docstring)."""

    name = "provisioner"

    def __init__(
        self,
        *,
        client: Client,
        cluster: Cluster,
        cloud_provider: CloudProvider,
        unavailable_offerings: UnavailableOfferings,
        recorder: EventRecorder,
        clock: Clock,
        settings: Settings,
        metrics: KarpenterMetrics,
        options: SchedulerOptions | None = None,
        overlays: OverlayStore | None = None,
    ) -> None:
        self.client = client
        self.cluster = cluster
        self.clock = clock
        self.settings = settings
        self.metrics = metrics
        self.options = options or SchedulerOptions(
            preference_policy=settings.preference_policy,
            min_values_policy=settings.min_values_policy,
            improvement_budget=settings.improvement_budget,
            reserved_capacity=settings.feature_gates.reserved_capacity,
            # Karpenter's provisioner: a pod that could use a full reservation waits
            # for the next round rather than fall back (DisableReservedCapacityFallback).
            reserved_offering_mode="Strict",
        )
        self.batcher = Batcher(
            clock, idle=settings.batch_idle_duration, maximum=settings.batch_max_duration
        )
        self.instance_types = InstanceTypeCache(
            cloud_provider, unavailable_offerings, clock, overlays=overlays
        )
        self.events = PodEvents(recorder, clock)
        self.pool_events = NodePoolEvents(recorder, clock)
        self._last_round = float("-inf")
        self._ready_pools = 0
        """NodePools the last :meth:`templates` found ready (Karpenter's
        ErrNodePoolsNotFound when none), whether or not they had instance types."""
        self._batch_waiting = False
        """A batch window closed and its round still waits for the model to sync."""
        self._skipped_pools: dict[str, str] = {}
        self._zones: set[str] = set()
        """The zones of karpenter_scheduler_pending_pods_by_effective_zone_count set."""
        # NodePool name -> (the parsed NodePool, its hash): hashing the template costs
        # ~1 ms, once per NodePool version rather than once per NodeClaim.
        self._hashes: dict[str, tuple[NodePool, str]] = {}
        self.virtual_pods: VirtualPodSource | None = None
        """CapacityBuffer headroom, scheduled with the pending pods in every round
        (set by :mod:`karpy.controllers.capacitybuffer` behind its feature gate)."""

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
                if idle_for < _RETRY_PENDING or not self._has_work():
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

    def _has_work(self) -> bool:
        return bool(self.cluster.provisionable_pods() or self.cluster.reschedulable_pods()
                    or self.buffer_pods())

    def buffer_pods(self) -> list[Pod]:
        """The virtual pods of the CapacityBuffers (none without the feature gate)."""
        return list(self.virtual_pods.pods()) if self.virtual_pods is not None else []

    def _real(self, pods: Sequence[Pod]) -> list[Pod]:
        """``pods`` without the virtual ones (never nominated, no events)."""
        source = self.virtual_pods
        return list(pods) if source is None else [p for p in pods if not source.is_virtual(p.key)]

    def _skips_dra(self, obj: Mapping[str, Any], pod: Pod) -> bool:
        """Whether ``pod`` has Dynamic Resource Allocation claims and IGNORE_DRA_REQUESTS
        holds (Karpenter's default): karpy cannot simulate the devices such a pod needs,
        so it says so on the pod and buys nothing for it."""
        if not self.settings.ignore_dra_requests or not has_dra_requirements(obj):
            return False
        if self.events.failed_to_schedule(pod, _DRA_UNSUPPORTED):
            log.info(
                "skipping pod with Dynamic Resource Allocation requirements, not yet "
                "supported by Karpenter",
                extra={"Pod": {"name": pod.name, "namespace": pod.namespace}},
            )
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
        if not self._has_work():
            return None
        # Capacity first, pods second: a pod that binds in between is then counted on
        # its node rather than provisioned for (under-provisioning heals next round,
        # over-provisioning costs money).
        nodes = self.cluster.existing_nodes()
        pending = self.pending_pods()
        deleting = self.moving_pods()
        pods = pending + deleting + self.buffer_pods()
        if not pods:
            self._record_zones({})
            return None
        log.debug(
            "computing scheduling decision for provisionable pod(s)",
            extra={"pending-pods": len(pending), "deleting-pods": len(deleting)},
        )
        templates = await self.templates()
        if not templates and not self._ready_pools:
            log.info("no nodepools found")
            # a verdict all the same: nowhere to go (Karpenter marks them failed too)
            self._mark_decisions(failed=self._real(pending), placed=())
            return None
        # Ready NodePools whose instance types were all filtered out still get a solve
        # (Karpenter builds its scheduler without templates): pods may fit existing and
        # in-flight capacity, and the rest are told why they cannot schedule.
        simulator = Simulator(
            templates, daemonsets=self.cluster.daemonset_pods(), options=self.options
        )
        keys = reservation_label_keys(it for t in templates for it in t.instance_types)
        # NodeClaims not launched yet hold reservation slots the cloud does not count
        in_flight = held_in_flight(self.cluster.unlaunched_nodeclaims(), keys) if keys else None
        results = simulator.solve(
            pods,
            nodes=nodes,
            namespaces=self.cluster.namespaces(),
            reservations_in_flight=in_flight,
        )
        if self.virtual_pods is not None:
            self.virtual_pods.observe(results)
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
            failed=self._real([e.pod for e in results.errors]),
            placed=self._real([
                *(p for plan in results.new_nodeclaims for p in plan.pods),
                *(p for node in results.existing_nodes for p in node.pods),
            ]),
        )
        return results

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

    def pending_pods(self) -> list[Pod]:
        """Provisionable pods as the simulator sees them, volume topology included;
        pods that cannot be provisioned for yet are left out (Karpenter's Validate)."""
        out = []
        ignored = 0
        for obj in self.cluster.provisionable_pods():
            pod = self.cluster.scheduling_pod(obj)
            if _avoids_managed_nodes(pod):
                ignored += 1
                continue
            if self._skips_dra(obj, pod):
                continue
            try:
                out.append(self.cluster.with_volume_topology(pod))
            except VolumeError as exc:
                ignored += 1
                reason = f"failed to validate pod, {exc}"
                if self.events.failed_to_schedule(pod, reason):
                    log.info(
                        "ignoring pod, failed to validate pod",
                        extra={"Pod": {"name": pod.name, "namespace": pod.namespace},
                               "error": str(exc)},
                    )
        self.metrics.scheduler_ignored_pods.set(ignored)
        return out

    def moving_pods(self) -> list[Pod]:
        """Pods on machines being deleted, restricted to where their volumes can go;
        a pod whose volumes cannot be resolved is left out, as Karpenter does."""
        out = []
        for pod in self.cluster.reschedulable_pods():
            try:
                out.append(self.cluster.with_volume_topology(pod, bound=True))
            except VolumeError as exc:
                log.error(
                    "failed getting volume topology requirements",
                    extra={"Pod": {"name": pod.name, "namespace": pod.namespace},
                           "error": str(exc)},
                )
        return out

    async def templates(self) -> list[NodePoolTemplate]:
        """The simulator's view of every usable NodePool (ready, valid, with instance
        types), heaviest first; skipped pools are logged once per reason."""
        templates = []
        self._ready_pools = 0
        for entry in self.cluster.nodepools():
            reason = self._unusable(entry)
            if reason is None and entry.replicas is None:
                self._ready_pools += 1
            if entry.replicas is not None:
                # Static: its nodes are karpy.controllers.static's, never pods'. Without
                # the gate nothing acts on spec.replicas: say so rather than stay silent.
                if self.settings.feature_gates.static_capacity:
                    continue
                reason = ("ignoring nodepool, spec.replicas is set but the StaticCapacity "
                          "feature gate is off")
            if reason is None:
                try:
                    instance_types = await self.instance_types.get(entry)
                except Exception as exc:
                    reason = f"skipping, unable to resolve instance types: {exc}"
                else:
                    if not instance_types:
                        reason = "skipping, no resolved instance types found"
                    elif not self.options.reserved_capacity:
                        instance_types = without_reserved(instance_types)
            if reason is not None:
                if self._skipped_pools.get(entry.name) != reason:
                    self._skipped_pools[entry.name] = reason
                    log.info(reason, extra={"NodePool": {"name": entry.name}})
                continue
            self._skipped_pools.pop(entry.name, None)
            template = NodePoolTemplate.from_nodepool_dict(
                entry.raw, instance_types, usage=self.cluster.nodepool_usage(entry.name)
            )
            filtered = filtered_out(
                template, relax_min_values=self.options.min_values_policy == "BestEffort"
            )
            if filtered is not None:
                if self.pool_events.no_compatible_instance_types(
                    entry.raw, min_values=filtered == "minValues"
                ):
                    log.info(
                        "skipping, nodepool requirements filtered out all instance types",
                        extra={"NodePool": {"name": entry.name}},
                    )
                continue
            templates.append(template)
        return templates

    @staticmethod
    def _unusable(entry: NodePoolEntry) -> str | None:
        if entry.model is None:
            return f"ignoring nodepool, invalid: {entry.error}"
        if entry.deleting:
            return "ignoring nodepool, being deleted"
        if not entry.ready:
            return "ignoring nodepool, not ready"
        return None

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
            if not isinstance(e.reason, ReservedOfferingError) and self._real([e.pod])
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
            real = self._real(placement.pods)
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
        over = _exceeded(entry, self.cluster.nodepool_usage(entry.name))
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
        real = self._real(plan.pods)
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


def _avoids_managed_nodes(pod: Pod) -> bool:
    """The pod asks not to run on nodes karpy manages (``karpenter.sh/nodepool
    DoesNotExist``), e.g. karpy's own replicas: not ours to provision for, and not worth
    a FailedScheduling event (Karpenter ignores such pods the same way)."""
    requirement = pod.strict_requirements.get(LABEL_NODEPOOL)
    return requirement is not None and requirement.operator == "DoesNotExist"


def _requests_of(nodeclaim: dict[str, Any]) -> dict[str, Any]:
    spec = nodeclaim.get("spec") or {}
    return dict((spec.get("resources") or {}).get("requests") or {})


def _exceeded(entry: NodePoolEntry, usage: Any) -> str | None:
    """Karpenter's Limits.ExceededBy: the first resource whose usage is over its limit."""
    limits = res.parse_resource_list((entry.raw.get("spec") or {}).get("limits"))
    for name, limit in sorted(limits.items()):
        used = usage.get(name, 0)
        if used > limit:
            return (
                f"{name} resource usage of {res.format_quantity(name, used)} exceeds limit "
                f"of {res.format_quantity(name, limit)}"
            )
    return None

