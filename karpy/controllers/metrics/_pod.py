"""``metrics.pod``: karpenter_pods_state (one sample per pod, labelled with where it runs
and how it is doing), karpenter_pods_startup_duration_seconds (creation to Ready,
recorded once per pod that karpy saw pending, as Karpenter measures it) and
karpenter_pods_bound_duration_seconds (creation to PodScheduled, once per pod karpy saw
unbound); while a pod waits, karpenter_pods_unstarted_time_seconds (Pending, or not yet
Ready after karpy saw it Pending) and karpenter_pods_unbound_time_seconds (Pending and
not scheduled) give its age, read at scrape time.

The ``karpenter_pods_provisioning_*`` family measures the same waits from a moment in
karpy's memory instead of the pod's creation (:mod:`karpy.state.pod_scheduling`): from
the round that first found the pod a place (_unbound_time_seconds, _unstarted_time_seconds
while it waits; _bound_duration_seconds, _startup_duration_seconds once done), and, while
no round has decided about it yet, from when karpy first saw it
(_scheduling_undecided_time_seconds). Those starts are set by the provisioner without a
pod event, so the samples read them at scrape time and appear or vanish with them.
Once a pod's start is recorded (or it ends without one) its moments are forgotten."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

from karpy.apis.labels import (
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_ZONE,
)
from karpy.apis.pods import is_terminal
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.metrics._store import Gauge, GaugeStore, Sample
from karpy.runtime import Client, Request, Result, errors, kinds, parse_time
from karpy.state.pod_scheduling import PodSchedulingTimes

__all__ = [
    "POD_PROVISIONING_UNBOUND",
    "POD_PROVISIONING_UNSTARTED",
    "POD_SCHEDULING_UNDECIDED",
    "POD_STATE",
    "POD_UNBOUND",
    "POD_UNSTARTED",
    "PodMetrics",
]

POD_STATE: Final = Gauge(
    "karpenter_pods_state",
    "Pod state is the current state of pods. This metric can be used several ways as it is "
    "labeled by the pod name, namespace, owner, node, nodepool name, zone, architecture, "
    "capacity type, instance type, pod phase, and pod readiness.",
    ("name", "namespace", "owner", "node", "scheduled", "nodepool", "zone", "arch",
     "capacity_type", "instance_type", "phase", "ready", "managed"),
)
POD_UNSTARTED: Final = Gauge(
    "karpenter_pods_unstarted_time_seconds",
    "The time from pod creation until the pod is running.", ("name", "namespace"),
)
POD_UNBOUND: Final = Gauge(
    "karpenter_pods_unbound_time_seconds",
    "The time from pod creation until the pod is bound.", ("name", "namespace"),
)
_FROM_MEMORY: Final = (
    "Note: this calculated from a point in memory, not by the pod creation timestamp."
)
POD_PROVISIONING_UNSTARTED: Final = Gauge(
    "karpenter_pods_provisioning_unstarted_time_seconds",
    "The time from when Karpenter first thinks the pod can schedule until the pod is "
    f"running. {_FROM_MEMORY}",
    ("name", "namespace"),
)
POD_PROVISIONING_UNBOUND: Final = Gauge(
    "karpenter_pods_provisioning_unbound_time_seconds",
    f"The time from when Karpenter first thinks the pod can schedule until it binds. "
    f"{_FROM_MEMORY}",
    ("name", "namespace"),
)
POD_SCHEDULING_UNDECIDED: Final = Gauge(
    "karpenter_pods_provisioning_scheduling_undecided_time_seconds",
    "The time from when Karpenter has seen a pod without making a scheduling decision for "
    f"the pod. {_FROM_MEMORY}",
    ("name", "namespace"),
)
GAUGES: Final = (
    POD_STATE, POD_UNSTARTED, POD_UNBOUND, POD_PROVISIONING_UNSTARTED,
    POD_PROVISIONING_UNBOUND, POD_SCHEDULING_UNDECIDED,
)


def _ready(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready" and condition.get("status") == "True":
            return condition  # type: ignore[no-any-return]
    return None


def _condition(pod: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    """The pod's condition ``type_`` if it is True."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == type_ and condition.get("status") == "True":
            return condition  # type: ignore[no-any-return]
    return None


def _waiting_unbound(pod: Mapping[str, Any]) -> bool:
    """Pending and not scheduled (Karpenter's unbound)."""
    return ((pod.get("status") or {}).get("phase") == "Pending"
            and _condition(pod, "PodScheduled") is None)


def _owner(pod: Mapping[str, Any]) -> str:
    meta = pod["metadata"]
    refs = meta.get("ownerReferences") or ()
    if not refs:
        return ""
    ref = refs[0]
    return (f"/apis/{ref.get('apiVersion', '')}/namespaces/{meta.get('namespace', '')}/"
            f"{str(ref.get('kind', '')).lower()}s/{ref.get('name', '')}")


class PodMetrics:
    """The ``metrics.pod`` reconciler."""

    name = "metrics.pod"

    def __init__(
        self,
        *,
        client: Client,
        store: GaugeStore,
        metrics: KarpenterMetrics,
        scheduling: PodSchedulingTimes,
    ) -> None:
        self._client = client
        self._store = store
        self._metrics = metrics
        self._scheduling = scheduling
        self._pending: set[str] = set()
        """Pods seen Pending whose startup has not been recorded yet."""
        self._unbound: set[str] = set()
        """Pods seen Pending and unscheduled whose binding has not been recorded yet."""

    async def reconcile(self, request: Request) -> Result:
        """Export the pod's state; record its startup when it turns Ready."""
        key = f"{request.namespace}/{request.name}"
        try:
            pod = await self._client.get(kinds.POD, request.name, namespace=request.namespace)
        except errors.NotFound:
            self._pending.discard(key)
            self._unbound.discard(key)
            self._store.delete(key)
            return Result()
        samples = [Sample(POD_STATE, await self._labels(pod), 1.0)]
        schedulable = self._scheduling.schedulable(key)
        self._record_startup(key, pod, schedulable)
        self._record_bound(key, pod, schedulable)
        ident = {"name": request.name, "namespace": request.namespace}
        created = parse_time(pod["metadata"].get("creationTimestamp"))
        waiting_unbound = _waiting_unbound(pod)
        if created is not None:
            if key in self._pending:
                samples.append(Sample(POD_UNSTARTED, ident, 0.0, since=created))
            if waiting_unbound:
                samples.append(Sample(POD_UNBOUND, ident, 0.0, since=created))
        since_schedulable = self._since(self._scheduling.schedulable, key)
        if key in self._pending:
            samples.append(Sample(POD_PROVISIONING_UNSTARTED, ident, 0.0,
                                  since_of=since_schedulable))
        if waiting_unbound:
            samples.append(Sample(POD_PROVISIONING_UNBOUND, ident, 0.0,
                                  since_of=since_schedulable))
        if not (pod.get("spec") or {}).get("nodeName") and waiting_unbound:
            samples.append(Sample(POD_SCHEDULING_UNDECIDED, ident, 0.0,
                                  since_of=self._undecided_since(key)))
        if _ready(pod) is not None or is_terminal(pod):
            # its start is recorded (or will never be): Karpenter's
            # ClearPodSchedulingMappings
            self._scheduling.clear(key)
        self._store.update(key, samples)
        return Result()

    @staticmethod
    def _since(
        moment: Callable[[str], datetime | None], key: str
    ) -> Callable[[], datetime | None]:
        return lambda: moment(key)

    def _undecided_since(self, key: str) -> Callable[[], datetime | None]:
        """When karpy first saw the pod, while no round has decided about it."""
        times = self._scheduling

        def since() -> datetime | None:
            return None if times.decided(key) is not None else times.acked(key)

        return since

    def _record_bound(
        self, key: str, pod: Mapping[str, Any], schedulable: datetime | None
    ) -> None:
        if _waiting_unbound(pod):
            self._unbound.add(key)
            return
        if (pod.get("status") or {}).get("phase") == "Pending":
            return
        scheduled = _condition(pod, "PodScheduled")
        if key not in self._unbound or scheduled is None:
            return
        bound = parse_time(scheduled.get("lastTransitionTime"))
        created = parse_time(pod["metadata"].get("creationTimestamp"))
        if bound is not None and created is not None:
            self._metrics.pods_bound_duration.record(max((bound - created).total_seconds(), 0.0))
        if bound is not None and schedulable is not None:
            self._metrics.pods_provisioning_bound_duration.record(
                max((bound - schedulable).total_seconds(), 0.0)
            )
        self._unbound.discard(key)

    async def _labels(self, pod: Mapping[str, Any]) -> dict[str, str]:
        meta = pod["metadata"]
        node_name = str((pod.get("spec") or {}).get("nodeName") or "")
        node_labels: Mapping[str, str] = {}
        if node_name:
            try:
                node = await self._client.get(kinds.NODE, node_name)
                node_labels = node["metadata"].get("labels") or {}
            except errors.NotFound:
                pass
        return {
            "name": str(meta["name"]),
            "namespace": str(meta.get("namespace") or ""),
            "owner": _owner(pod),
            "node": node_name,
            "scheduled": "true" if node_name else "false",
            "nodepool": node_labels.get(LABEL_NODEPOOL, ""),
            "zone": node_labels.get(LABEL_ZONE, ""),
            "arch": node_labels.get(LABEL_ARCH, ""),
            "capacity_type": node_labels.get(LABEL_CAPACITY_TYPE, ""),
            "instance_type": node_labels.get(LABEL_INSTANCE_TYPE, ""),
            "phase": str((pod.get("status") or {}).get("phase") or ""),
            "ready": "true" if _ready(pod) is not None else "false",
            "managed": "true" if node_labels.get(LABEL_NODEPOOL) else "false",
        }

    def _record_startup(
        self, key: str, pod: Mapping[str, Any], schedulable: datetime | None
    ) -> None:
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Pending":
            self._pending.add(key)
            return
        if key not in self._pending:
            return  # running before karpy saw it pending: its startup is not ours to time
        ready = _ready(pod)
        if ready is not None:
            started = parse_time(ready.get("lastTransitionTime"))
            created = parse_time(pod["metadata"].get("creationTimestamp"))
            if started is not None and created is not None:
                self._metrics.pods_startup_duration.record(
                    max((started - created).total_seconds(), 0.0)
                )
            if started is not None and schedulable is not None:
                self._metrics.pods_provisioning_startup_duration.record(
                    max((started - schedulable).total_seconds(), 0.0)
                )
            self._pending.discard(key)
        elif phase in ("Succeeded", "Failed"):
            self._pending.discard(key)  # never became Ready: no startup to record
