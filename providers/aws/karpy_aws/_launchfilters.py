"""The instance types and offerings a launch leaves out, as Karpenter AWS's create path
does (pkg/providers/instance/filter): applied to the types compatible with a NodeClaim,
before the capacity type and the fleet's overrides are chosen.

* **exotic types** (``exotic_filter``): metal sizes and types with GPUs or
  accelerators (NVIDIA, AMD, Neuron, Habana) are dropped while a generic type remains,
  so a pod that asks for none of them never lands on one because it was the cheapest
  fit; when only exotic types are left (the pods request a GPU, say) they are kept. A
  NodeClaim with ``minValues`` keeps every type, as in Karpenter (the flexibility it
  asks for counts types the filter would remove).
* **spot dearer than on-demand** (``spot_price_cap``): when the NodeClaim allows both
  capacity types, spot offerings priced above the cheapest compatible, available
  on-demand offering are not asked for: on-demand would be cheaper and is not
  interrupted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from karpy.apis import labels as wk
from karpy.cloudprovider import InstanceType
from karpy.scheduling import Requirements
from karpy_aws.apis import labels as aws

__all__ = ["EXOTIC_RESOURCES", "exotic_filter", "is_exotic", "spot_price_cap"]

#: resources whose presence in an instance type's capacity makes it exotic
EXOTIC_RESOURCES: Final = (
    aws.RESOURCE_AWS_NEURON,
    aws.RESOURCE_AWS_NEURON_CORE,
    aws.RESOURCE_AMD_GPU,
    aws.RESOURCE_NVIDIA_GPU,
    aws.RESOURCE_HABANA_GAUDI,
)


def is_exotic(instance_type: InstanceType) -> bool:
    """Whether ``instance_type`` is a metal size or carries GPUs or accelerators."""
    size = instance_type.requirements.get(aws.LABEL_INSTANCE_SIZE)
    if size is not None and any("metal" in v for v in size.values if not size.complement):
        return True
    return any(instance_type.capacity.get(r, 0) > 0 for r in EXOTIC_RESOURCES)


def exotic_filter(reqs: Requirements, instance_types: Sequence[InstanceType]) -> list[InstanceType]:
    """``instance_types`` without the exotic ones, unless nothing else is left (or the
    NodeClaim has minValues)."""
    if reqs.has_min_values():
        return list(instance_types)
    generic = [it for it in instance_types if not is_exotic(it)]
    return generic or list(instance_types)


def spot_price_cap(reqs: Requirements, instance_types: Sequence[InstanceType]) -> float | None:
    """The highest price a spot offering may have: the cheapest compatible, available
    on-demand offering's, when the NodeClaim allows both capacity types and both have
    such offerings; None (no cap) otherwise."""
    if reqs.has_min_values():
        return None
    allowed = reqs.get(wk.LABEL_CAPACITY_TYPE)
    if allowed is not None and not (
        allowed.has(wk.CAPACITY_TYPE_SPOT) and allowed.has(wk.CAPACITY_TYPE_ON_DEMAND)
    ):
        return None
    cheapest_on_demand: float | None = None
    has_spot = False
    for it in instance_types:
        for o in it.offerings:
            if not o.available or reqs.intersects(o.requirements) is not None:
                continue
            if o.capacity_type == wk.CAPACITY_TYPE_ON_DEMAND:
                if cheapest_on_demand is None or o.price < cheapest_on_demand:
                    cheapest_on_demand = o.price
            elif o.capacity_type == wk.CAPACITY_TYPE_SPOT:
                has_spot = True
    return cheapest_on_demand if has_spot else None
