"""How many chunks a CapacityBuffer asks for: Cluster Autoscaler's arithmetic, as
Karpenter v1.14 does it.

``replicas`` and ``percentage`` (of the scalableRef's replicas, rounded up, at least 1)
combine by taking the larger; ``limits`` cap that; with neither count set, ``limits``
alone decide how many chunks fit. A limit on a resource the chunk does not request
constrains nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from karpy.apis.autoscaling import CapacityBufferSpec
from karpy.scheduling import resources as res

__all__ = ["INT32_MAX", "buffer_replicas", "limit_replicas", "percentage_replicas"]

INT32_MAX = 2**31 - 1


def limit_replicas(limits: Mapping[str, int], requests: Mapping[str, int]) -> int | None:
    """How many chunks of ``requests`` fit in ``limits`` (both parsed), or None when no
    limited resource is requested."""
    fits: list[int] = []
    for name, limit in limits.items():
        request = requests.get(name, 0)
        if request > 0:
            fits.append(min(limit // request, INT32_MAX))
    return min(fits) if fits else None


def percentage_replicas(scalable_replicas: int, percentage: int) -> int:
    """``ceil(scalable_replicas * percentage / 100)``, at least 1 when both are above 0."""
    count = math.ceil(scalable_replicas * percentage / 100)
    if count < 1 and percentage > 0 and scalable_replicas > 0:
        return 1
    return count


def buffer_replicas(
    spec: CapacityBufferSpec, requests: Mapping[str, int], scalable_replicas: int | None
) -> int:
    """The chunks the buffer keeps capacity for (see the module docstring).
    ``scalable_replicas`` is the scalableRef's ``spec.replicas`` (None for a PodTemplate)."""
    counts: list[int] = []
    if spec.percentage is not None and scalable_replicas:
        counts.append(percentage_replicas(scalable_replicas, spec.percentage))
    if spec.replicas is not None:
        counts.append(spec.replicas)
    fit = limit_replicas(res.parse_resource_list(spec.limits), requests) if spec.limits else None
    if fit is not None:
        return min(max(counts), fit) if counts else fit
    return max(counts) if counts else 0
