"""The Events the provisioner records on pods, as Karpenter words them.

* ``FailedScheduling`` (Warning): "Failed to schedule pod, <why>" — once per pod and
  reason every 5 minutes, however often the pod is retried; a pod the provisioner
  ignores because its volumes cannot be resolved gets the same event, its reason
  starting "failed to validate pod";
* ``Nominated`` (Normal): "Pod should schedule on: nodeclaim/<name>" — through a shared
  token bucket (5/s, burst 10) as in Karpenter, so a thousand-pod batch does not write a
  thousand Events;
* ``NoCompatibleInstanceTypes`` (Warning, on the NodePool): "NodePool requirements
  filtered out all compatible available instance types" (with "due to minValues
  incompatibility" when minValues is what filtered them), once a minute per NodePool.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from karpy.runtime import Clock, EventRecorder
from karpy.scheduling import Pod

__all__ = ["NodePoolEvents", "PodEvents", "pod_reference"]

_FAILED_DEDUPE_SECONDS = 300.0
_NOMINATION_RATE = 5.0
_NOMINATION_BURST = 10.0
_MEMORY = 10_000
_NO_COMPATIBLE_DEDUPE_SECONDS = 60.0


def pod_reference(pod: Pod) -> dict[str, Any]:
    """The minimal object an Event needs to name ``pod``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
    }


class PodEvents:
    """Records the provisioner's pod events (see the module docstring)."""

    def __init__(self, recorder: EventRecorder, clock: Clock) -> None:
        self._recorder = recorder
        self._clock = clock
        self._failed: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._tokens = _NOMINATION_BURST
        self._refilled = clock.monotonic()

    def failed_to_schedule(self, pod: Pod, reason: str) -> bool:
        """Record FailedScheduling unless the same was recorded recently."""
        now = self._clock.monotonic()
        key = (pod.uid or pod.key, reason)
        last = self._failed.get(key)
        if last is not None and now - last < _FAILED_DEDUPE_SECONDS:
            return False
        self._failed[key] = now
        self._failed.move_to_end(key)
        while len(self._failed) > _MEMORY:
            self._failed.popitem(last=False)
        self._recorder.warning(
            pod_reference(pod), "FailedScheduling", f"Failed to schedule pod, {reason}"
        )
        return True

    def nominated(self, pod: Pod, *, nodeclaim: str = "", node: str = "") -> bool:
        """Record Nominated if the shared rate limit allows."""
        now = self._clock.monotonic()
        self._tokens = min(
            _NOMINATION_BURST, self._tokens + (now - self._refilled) * _NOMINATION_RATE
        )
        self._refilled = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        targets = []
        if nodeclaim:
            targets.append(f"nodeclaim/{nodeclaim}")
        if node:
            targets.append(f"node/{node}")
        self._recorder.normal(
            pod_reference(pod), "Nominated", f"Pod should schedule on: {', '.join(targets)}"
        )
        return True


class NodePoolEvents:
    """Records the provisioner's NodePool events (see the module docstring)."""

    def __init__(self, recorder: EventRecorder, clock: Clock) -> None:
        self._recorder = recorder
        self._clock = clock
        self._last: dict[str, float] = {}

    def no_compatible_instance_types(
        self, nodepool: Mapping[str, Any], *, min_values: bool
    ) -> bool:
        """Record NoCompatibleInstanceTypes unless recorded for this NodePool within a
        minute (Karpenter's DedupeTimeout)."""
        meta = nodepool.get("metadata") or {}
        key = str(meta.get("uid") or meta.get("name") or "")
        now = self._clock.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < _NO_COMPATIBLE_DEDUPE_SECONDS:
            return False
        self._last[key] = now
        message = "NodePool requirements filtered out all compatible available instance types"
        if min_values:
            message += " due to minValues incompatibility"
        self._recorder.warning(nodepool, "NoCompatibleInstanceTypes", message)
        return True
