"""The Events termination records, with Karpenter's reasons, messages and dedupe values
(the pod's or node's name, as pkg/controllers/node/termination/terminator/events at
v1.14.1), so that ``kubectl describe node`` and ``kubectl get events`` read as they do
under Karpenter: one FailedDraining per node per 2 minutes however many evictions a PDB
refuses, not one per refusal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final, Protocol

__all__ = [
    "REASON_AWAITING_VOLUME_DETACHMENT",
    "REASON_DISRUPTED",
    "REASON_EVICTED",
    "REASON_FAILED_DRAINING",
    "REASON_TERMINATION_GRACE_PERIOD_EXPIRING",
    "Recorder",
    "awaiting_volume_detachment",
    "disrupt_pod_delete",
    "evicted",
    "failed_to_drain",
    "go_time",
    "pretty_slice",
    "termination_grace_period_expiring",
]

REASON_EVICTED: Final = "Evicted"
REASON_DISRUPTED: Final = "Disrupted"
REASON_FAILED_DRAINING: Final = "FailedDraining"
REASON_TERMINATION_GRACE_PERIOD_EXPIRING: Final = "TerminationGracePeriodExpiring"
REASON_AWAITING_VOLUME_DETACHMENT: Final = "AwaitingVolumeDetachment"

Obj = Mapping[str, Any]


class Recorder(Protocol):
    """What termination needs of an event recorder (``karpy.runtime.EventRecorder``)."""

    def normal(self, obj: Obj, reason: str, message: str, *,
               dedupe_values: Sequence[str] = ()) -> None:
        """Record a Normal event about ``obj`` (dropped while one of the same reason and
        ``dedupe_values`` was recorded in the last 2 minutes)."""
        ...

    def warning(self, obj: Obj, reason: str, message: str, *,
                dedupe_values: Sequence[str] = ()) -> None:
        """Record a Warning event about ``obj`` (dedupe as :meth:`normal`)."""
        ...


def pretty_slice(items: Sequence[str], max_items: int) -> str:
    """``a, b, c and 2 other(s)``: Karpenter's way of shortening a list in a message."""
    if len(items) <= max_items:
        return ", ".join(items)
    return ", ".join(items[:max_items]) + f" and {len(items) - max_items} other(s)"


def go_time(when: datetime) -> str:
    """A time as Go's ``%v`` prints a UTC time.Time (``2024-01-01 10:00:00 +0000 UTC``)."""
    return when.strftime("%Y-%m-%d %H:%M:%S +0000 UTC")


def evicted(recorder: Recorder, pod: Obj, reason: str) -> None:
    """A pod was evicted through the Eviction API."""
    recorder.normal(pod, REASON_EVICTED, f"Evicted pod: {reason}", dedupe_values=(_name(pod),))


def disrupt_pod_delete(
    recorder: Recorder, pod: Obj, grace_seconds: int, termination_time: datetime
) -> None:
    """A pod was deleted (bypassing PDBs and do-not-disrupt) to finish before the
    NodeClaim's terminationGracePeriod runs out."""
    pod_grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds") or 0
    recorder.normal(
        pod, REASON_DISRUPTED,
        f"Deleting the pod to accommodate the terminationTime {go_time(termination_time)} of "
        f"the node. The pod was granted {grace_seconds} seconds of grace-period of its "
        f"{pod_grace} terminationGracePeriodSeconds. This bypasses the PDB of the pod and the "
        "do-not-disrupt annotation.",
        dedupe_values=(_name(pod),),
    )


def failed_to_drain(recorder: Recorder, node: Obj, error: str) -> None:
    """The node still holds pods waiting to be evicted, or an eviction was refused."""
    # Deduped by the node alone, as Karpenter's: one FailedDraining per node per
    # 2 minutes, whichever reason came first (a PDB's refusals show in
    # karpenter_pods_eviction_requests_total{code="429"}).
    recorder.warning(node, REASON_FAILED_DRAINING, f"Failed to drain node, {error}",
                     dedupe_values=(_name(node),))


def awaiting_volume_detachment(recorder: Recorder, node: Obj, names: Sequence[str]) -> None:
    """Termination waits for these VolumeAttachments to be deleted."""
    recorder.normal(
        node, REASON_AWAITING_VOLUME_DETACHMENT,
        f"Awaiting deletion of bound volumeattachments ({pretty_slice(names, 5)})",
        dedupe_values=(_name(node),),
    )


def termination_grace_period_expiring(recorder: Recorder, obj: Obj, when: str) -> None:
    """The NodeClaim's terminationGracePeriod ends at ``when`` (RFC 3339)."""
    recorder.warning(obj, REASON_TERMINATION_GRACE_PERIOD_EXPIRING,
                     f"All pods will be deleted by {when}", dedupe_values=(_name(obj),))


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")
