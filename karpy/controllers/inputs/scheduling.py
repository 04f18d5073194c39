"""What a scheduling simulation starts from, in one place: the scheduling inputs.

Provisioning solves for the pods that need capacity; disruption asks what the same
solve would do without some nodes; the metrics price nodes from the same catalogue;
the tools (``karpy simulate``, ``karpy explain``) ask the same questions of a view. All
of them must see the same things, built the same way, or they disagree about what fits:

* each NodePool's instance types (:class:`InstanceTypeCache`: NodeOverlays applied,
  offerings that recently ran out masked, reservations asked again every round);
* the NodePool templates the simulator packs into (ready, valid, with instance types,
  heaviest first; an unusable pool is logged once per reason);
* the pending pods (provisionable, not nominated, volume topology applied; a pod that
  cannot be provisioned for yet gets a FailedScheduling event and is left out), the
  pods moving off machines being deleted, and the CapacityBuffers' virtual pods;
* the simulator's options (Karpenter's preference and minValues policies, reserved
  capacity).

One :class:`SchedulingInputs` is built by the operator and carried in
:class:`~karpy.controllers.deps.Deps`; the provisioner, disruption, the cost metrics and
the nodeoverlay controller all read it, so the instance types are fetched and cached
once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from karpy.apis.labels import LABEL_NODEPOOL
from karpy.apis.pods import has_dra_requirements
from karpy.cloudprovider import CloudProvider, UnavailableOfferings
from karpy.controllers.inputs.events import NodePoolEvents, PodEvents
from karpy.controllers.inputs.instancetypes import InstanceTypeCache
from karpy.controllers.inputs.virtualpods import VirtualPodSource
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.settings import Settings
from karpy.runtime import Clock, EventRecorder
from karpy.scheduling import NodePoolTemplate, Pod
from karpy.scheduling.defaultspread import with_defaults
from karpy.scheduling.filtering import filtered_out
from karpy.scheduling.reservations import without_reserved
from karpy.scheduling.simulator import SchedulerOptions
from karpy.state import Cluster, NodePoolEntry, OverlayStore, VolumeError

__all__ = ["SchedulingInputs", "has_dra_requirements", "scheduler_options"]

log = logging.getLogger("controller")

_DRA_UNSUPPORTED = (
    "pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter"
)


def scheduler_options(settings: Settings) -> SchedulerOptions:
    """The provisioner's simulator options from ``settings``."""
    return SchedulerOptions(
        preference_policy=settings.preference_policy,
        min_values_policy=settings.min_values_policy,
        improvement_budget=settings.improvement_budget,
        reserved_capacity=settings.feature_gates.reserved_capacity,
        # Karpenter's provisioner: a pod that could use a full reservation waits for
        # the next round rather than fall back (DisableReservedCapacityFallback).
        reserved_offering_mode="Strict",
    )


class SchedulingInputs:
    """The scheduling inputs (see the module docstring)."""

    def __init__(
        self,
        *,
        cluster: Cluster,
        cloud_provider: CloudProvider,
        unavailable_offerings: UnavailableOfferings,
        recorder: EventRecorder,
        clock: Clock,
        settings: Settings,
        metrics: KarpenterMetrics,
        overlays: OverlayStore | None = None,
        options: SchedulerOptions | None = None,
    ) -> None:
        self.cluster = cluster
        self.settings = settings
        self.metrics = metrics
        self.options = options or scheduler_options(settings)
        """The simulator's options (disruption derives its own from these)."""
        self.instance_types = InstanceTypeCache(
            cloud_provider, unavailable_offerings, clock, overlays=overlays
        )
        """Each NodePool's instance types, shared by every reader."""
        self.events = PodEvents(recorder, clock)
        """FailedScheduling and Nominated events, deduplicated across all their writers."""
        self.pool_events = NodePoolEvents(recorder, clock)
        self.virtual_pods: VirtualPodSource | None = None
        """CapacityBuffer headroom, scheduled with the pending pods in every round
        (set by :mod:`karpy.controllers.capacitybuffer` behind its feature gate)."""
        self._skipped_pools: dict[str, str] = {}

    # -- pods ----------------------------------------------------------------------------

    def has_pods(self) -> bool:
        """Whether any pod (pending, moving or virtual) may need capacity."""
        return self.cluster.needs_capacity() or bool(self.buffer_pods())

    def buffer_pods(self) -> list[Pod]:
        """The virtual pods of the CapacityBuffers (none without the feature gate)."""
        return list(self.virtual_pods.pods()) if self.virtual_pods is not None else []

    def real(self, pods: Sequence[Pod]) -> list[Pod]:
        """``pods`` without the virtual ones (never nominated, no events)."""
        source = self.virtual_pods
        return list(pods) if source is None else [p for p in pods if not source.is_virtual(p.key)]

    def pending_pods(self) -> list[Pod]:
        """Provisionable pods as the simulator sees them, volume topology included;
        pods that cannot be provisioned for yet are left out (Karpenter's Validate)."""
        ignored = 0
        dra: dict[str, Mapping[str, Any]] = {}

        def skip(obj: Mapping[str, Any], pod: Pod) -> bool:
            nonlocal ignored
            if _avoids_managed_nodes(pod):
                ignored += 1
                return True
            if self._skips_dra(obj, pod):
                return True
            if has_dra_requirements(obj):
                dra[pod.key] = obj
            return False

        def invalid(pod: Pod, exc: VolumeError) -> None:
            nonlocal ignored
            ignored += 1
            if self.events.failed_to_schedule(pod, f"failed to validate pod, {exc}"):
                log.info(
                    "ignoring pod, failed to validate pod",
                    extra={"Pod": {"name": pod.name, "namespace": pod.namespace},
                           "error": str(exc)},
                )

        out = self._with_default_spread(self.cluster.pending_pods(skip=skip, invalid=invalid))
        if dra:
            resolved = (self._with_claims(p, dra[p.key]) if p.key in dra else p for p in out)
            out = [p for p in resolved if p is not None]
        self.metrics.scheduler_ignored_pods.set(ignored)
        return out

    def _with_claims(self, pod: Pod, obj: Mapping[str, Any]) -> Pod | None:
        """``pod`` with its ResourceClaims resolved (IGNORE_DRA_REQUESTS false); None,
        with a FailedScheduling event saying why, while they cannot be."""
        resolved = self.cluster.devices.resolve(obj, pod)
        if isinstance(resolved, str):
            self.events.failed_to_schedule(pod, f"failed to validate pod, {resolved}")
            return None
        return resolved

    def _with_default_spread(self, pods: list[Pod]) -> list[Pod]:
        """``pods``, each without spread constraints of its own given its scheduler's
        default constraints (SCHEDULER_CONFIG) with the selector kube-scheduler would
        deduce for it, as Karpenter v1.15's DefaultTopologySpreadInjector."""
        config = self.settings.scheduler_config
        if not config:
            return pods
        workloads = self.cluster.workloads
        out = []
        for pod in pods:
            defaults = config.for_scheduler(pod.scheduler_name)
            if defaults and not pod.spread_constraints:
                pod = with_defaults(pod, defaults, workloads.selector_for(pod))
            out.append(pod)
        return out

    def moving_pods(self) -> list[Pod]:
        """Pods on machines being deleted, restricted to where their volumes can go
        and given their scheduler's default spread constraints; a pod whose volumes
        cannot be resolved is left out, as Karpenter does."""
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
        return self._with_default_spread(out)

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

    # -- NodePools -----------------------------------------------------------------------

    def ready_pools(self) -> int:
        """How many NodePools are ready to provision for (not static), whether or not
        they have instance types: none is Karpenter's ErrNodePoolsNotFound. Derived from
        the cluster model each time, so the provisioner and disruption, which share these
        inputs, never read each other's count."""
        return sum(
            1 for e in self.cluster.nodepools() if _unusable(e) is None and e.replicas is None
        )

    async def templates(self) -> list[NodePoolTemplate]:
        """The simulator's view of every usable NodePool (ready, valid, with instance
        types), heaviest first; skipped pools are logged once per reason."""
        templates = []
        for entry in self.cluster.nodepools():
            reason = _unusable(entry)
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
                entry.raw, instance_types, usage=self.cluster.nodepool_usage(entry.name),
                shared_limits=self.cluster.shared_limits(entry.name),
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


def _unusable(entry: NodePoolEntry) -> str | None:
    if entry.model is None:
        return f"ignoring nodepool, invalid: {entry.error}"
    if entry.deleting:
        return "ignoring nodepool, being deleted"
    if not entry.ready:
        return "ignoring nodepool, not ready"
    return None


def _avoids_managed_nodes(pod: Pod) -> bool:
    """The pod asks not to run on nodes karpy manages (``karpenter.sh/nodepool
    DoesNotExist``), e.g. karpy's own replicas: not ours to provision for, and not worth
    a FailedScheduling event (Karpenter ignores such pods the same way)."""
    requirement = pod.strict_requirements.get(LABEL_NODEPOOL)
    return requirement is not None and requirement.operator == "DoesNotExist"
