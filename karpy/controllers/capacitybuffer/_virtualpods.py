"""The virtual pods of every CapacityBuffer ready for provisioning, and where the last
provisioning round put them.

A buffer of N chunks is N identical pods built from its pod template, named
``capacity-buffer-<buffer>-<i>`` in the buffer's namespace and annotated as Karpenter
annotates them. What would make the simulator reach for objects that do not exist is
stripped (``nodeName``, persistentVolumeClaim and ephemeral volumes); labels stay, so
topology spread and affinity count the chunks like the workload they stand for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy.apis.autoscaling import (
    ANNOTATION_BUFFER_NAME,
    ANNOTATION_BUFFER_NAMESPACE,
    ANNOTATION_FAKE_POD,
)
from karpy.scheduling import Pod, Results

__all__ = ["Placement", "VirtualPods", "build_virtual_pods"]

#: Karpenter's VirtualPodPriority (math.MinInt32): the lowest there is.
VIRTUAL_POD_PRIORITY = -(2**31)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one round put a buffer's chunks."""

    existing: int = 0
    """On existing (or in-flight) capacity."""
    new: int = 0
    """On NodeClaims the round had to create."""
    failed: int = 0
    """Nowhere (no NodePool fits the chunk)."""


def build_virtual_pods(
    namespace: str, name: str, uid: str, template: Mapping[str, Any], replicas: int
) -> tuple[Pod, ...]:
    """``replicas`` virtual pods of the buffer ``namespace/name`` from a PodTemplateSpec."""
    meta = template.get("metadata") or {}
    spec = _sanitized(template.get("spec") or {})
    pods = []
    for i in range(1, replicas + 1):
        manifest = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"capacity-buffer-{name}-{i}",
                "namespace": namespace,
                "uid": f"{uid}-{i}",
                "labels": dict(meta.get("labels") or {}),
                "annotations": {
                    ANNOTATION_FAKE_POD: "true",
                    ANNOTATION_BUFFER_NAME: name,
                    ANNOTATION_BUFFER_NAMESPACE: namespace,
                },
            },
            "spec": spec,
            "status": {"conditions": [{"type": "PodScheduled", "status": "False",
                                       "reason": "Unschedulable"}]},
        }  # fmt: skip
        pods.append(Pod.from_dict(manifest, keep_raw=False))
    return tuple(pods)


def _sanitized(spec: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(spec)
    out.pop("nodeName", None)
    dropped = {
        str(v.get("name")) for v in spec.get("volumes") or ()
        if v.get("persistentVolumeClaim") is not None or v.get("ephemeral") is not None
    }  # fmt: skip
    if dropped:
        out["volumes"] = [v for v in spec.get("volumes") or () if v.get("name") not in dropped]
        out["containers"] = [
            {**c, "volumeMounts": [m for m in c.get("volumeMounts") or ()
                                   if m.get("name") not in dropped]}
            for c in spec.get("containers") or ()
        ]  # fmt: skip
    out["priority"] = VIRTUAL_POD_PRIORITY
    return out


class VirtualPods:
    """The virtual pods by buffer (``namespace/name``), and the last round's placements.

    Implements :class:`karpy.controllers.inputs.virtualpods.VirtualPodSource`.
    """

    def __init__(self) -> None:
        self._by_buffer: dict[str, tuple[Pod, ...]] = {}
        self._owner: dict[str, str] = {}
        self._placements: dict[str, Placement] = {}

    def update(self, buffer: str, pods: Sequence[Pod]) -> None:
        """Set the virtual pods of ``buffer``; an empty sequence removes them. The last
        placement is kept while the pods stay the same (a resync changes nothing)."""
        before = self._by_buffer.get(buffer, ())
        if [p.key for p in before] == [p.key for p in pods] and (
            [p.signature for p in before] == [p.signature for p in pods]
            and [p.requests for p in before] == [p.requests for p in pods]
        ):
            self._by_buffer[buffer] = tuple(pods)
            return
        self.remove(buffer)
        if pods:
            self._by_buffer[buffer] = tuple(pods)
            for pod in pods:
                self._owner[pod.key] = buffer

    def remove(self, buffer: str) -> None:
        """Forget ``buffer`` (deleted, or no longer ready for provisioning)."""
        for pod in self._by_buffer.pop(buffer, ()):
            self._owner.pop(pod.key, None)
        self._placements.pop(buffer, None)

    def is_buffer(self, buffer: str) -> bool:
        """Whether ``buffer`` has virtual pods now."""
        return buffer in self._by_buffer

    def pods(self) -> list[Pod]:
        """Every buffer's virtual pods."""
        return [pod for pods in self._by_buffer.values() for pod in pods]

    def is_virtual(self, pod_key: str) -> bool:
        """Whether ``namespace/name`` is a virtual pod."""
        return pod_key in self._owner

    def observe(self, results: Results) -> None:
        """Record where a provisioning round placed each buffer's pods."""
        counts: dict[str, list[int]] = {}

        def count(pods: Sequence[Pod], slot: int) -> None:
            for pod in pods:
                buffer = self._owner.get(pod.key)
                if buffer is not None:
                    counts.setdefault(buffer, [0, 0, 0])[slot] += 1

        for existing in results.existing_nodes:
            count(existing.pods, 0)
        for plan in results.new_nodeclaims:
            count(plan.pods, 1)
        count([error.pod for error in results.errors], 2)
        for buffer, (on_existing, on_new, failed) in counts.items():
            self._placements[buffer] = Placement(on_existing, on_new, failed)

    def placement(self, buffer: str) -> Placement | None:
        """Where the last round that saw ``buffer``'s pods put them (None: no round yet)."""
        return self._placements.get(buffer)
