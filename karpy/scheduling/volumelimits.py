"""Volume attachment limits in one solve: how many volumes of each CSI driver a node
can attach, and which a plan puts where.

A node attaches a bounded number of volumes per CSI driver (EBS on a Nitro instance
shares its slots with network interfaces and NVMe instance stores; an Azure VM has its
SKU's ``MaxDataDiskCount``). kube-scheduler's NodeVolumeLimits plugin reads the limit a
node's CSINode publishes and leaves a pod pending on a node that is full; capacity
planned without the limit would never be used. As Karpenter v1.15 does
(pkg/scheduling/volumeusage.go, NodeClaim.CanAdd): an existing node counts the
volumes of its pods against its CSINode's limits, falling back to its instance type's
``volume_attachment_limits`` for a driver the CSINode does not publish (yet); a planned
NodeClaim keeps only the instance types whose limits take every volume of its pods.
Two pods mounting one claim attach it once. A driver with no limit anywhere is
unbounded.

Pods with volumes are placed one at a time (their signature keeps them apart from
pods without), so the tracker can count each pod's own claims.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from karpy.apis.labels import LABEL_INSTANCE_TYPE
from karpy.scheduling.catalog import iter_bits
from karpy.scheduling.instancetype import InstanceType
from karpy.scheduling.node import ExistingNode
from karpy.scheduling.pod import Pod

__all__ = ["VolumeTracker", "exceeded"]


def _union(
    a: Mapping[str, frozenset[str]], b: Mapping[str, frozenset[str]]
) -> dict[str, frozenset[str]]:
    out = dict(a)
    for driver, ids in b.items():
        out[driver] = out.get(driver, frozenset()) | ids
    return out


def exceeded(
    volumes: Mapping[str, frozenset[str]], limits: Mapping[str, int | None]
) -> str | None:
    """Karpenter's "would exceed volume limit" for the first driver over its limit."""
    for driver in sorted(volumes):
        limit = limits.get(driver)
        count = len(volumes[driver])
        if limit is not None and count > limit:
            return (f"would exceed volume limit (provisioner {driver}, volume-count "
                    f"{count}, volume-limit {limit})")
    return None


class VolumeTracker:
    """The volumes a solve attaches to each existing node and planned NodeClaim.

    ``types`` are every instance type the solve may see, for an existing node's
    fallback limits (by its instance-type label)."""

    def __init__(self, nodes: Sequence[ExistingNode], types: Iterable[InstanceType]) -> None:
        by_name = {it.name: it.volume_attachment_limits for it in types}
        self._node_limits: dict[str, Mapping[str, int | None]] = {}
        self._node_volumes: dict[str, dict[str, frozenset[str]]] = {}
        for node in nodes:
            limits: dict[str, int | None] = dict(
                by_name.get(node.labels.get(LABEL_INSTANCE_TYPE, ""), {}))
            limits.update(node.volume_limits)  # what the CSINode publishes wins
            self._node_limits[node.name] = limits
            attached = dict(node.attached)
            for pod in node.pods:
                if pod.volumes:
                    attached = _union(attached, pod.volumes)
            self._node_volumes[node.name] = attached
        self._claim_volumes: dict[str, dict[str, frozenset[str]]] = {}

    def check_node(self, pod: Pod, node: str) -> str | None:
        """Why ``pod``'s volumes do not fit on existing node ``node`` (None: they do)."""
        prospective = _union(self._node_volumes.get(node, {}), pod.volumes)
        return exceeded(prospective, self._node_limits.get(node, {}))

    def commit_node(self, pod: Pod, node: str) -> None:
        """``pod`` was placed on existing node ``node``."""
        self._node_volumes[node] = _union(self._node_volumes.get(node, {}), pod.volumes)

    def check_claim(
        self, pod: Pod, hostname: str, types: Sequence[InstanceType], mask: int
    ) -> int | str:
        """The types of ``mask`` that can attach ``pod``'s volumes together with those of
        the NodeClaim's pods (planned under ``hostname``), or why none can."""
        prospective = _union(self._claim_volumes.get(hostname, {}), pod.volumes)
        kept = 0
        most: dict[str, int] = {}
        for i in iter_bits(mask):
            limits = types[i].volume_attachment_limits
            fits = True
            for driver, ids in prospective.items():
                limit = limits.get(driver)
                if limit is not None and len(ids) > limit:
                    fits = False
                    most[driver] = max(most.get(driver, -1), limit)
            if fits:
                kept |= 1 << i
        if kept:
            return kept
        for driver in sorted(prospective):
            if driver in most:
                return (f"would exceed volume limit for all instance type options "
                        f"(provisioner {driver}, volume-count {len(prospective[driver])}, "
                        f"volume-limit {most[driver]})")
        return "would exceed volume limit for all instance type options"

    def commit_claim(self, pod: Pod, hostname: str) -> None:
        """``pod`` was placed on the NodeClaim planned under ``hostname``."""
        self._claim_volumes[hostname] = _union(self._claim_volumes.get(hostname, {}),
                                               pod.volumes)
