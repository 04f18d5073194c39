"""Whether a NodePool's own requirements leave it any instance type to launch.

Karpenter builds one template per NodePool before scheduling and drops those whose
requirements (its ``spec.template.spec.requirements`` and template labels) filter out
every instance type the provider offers, or leave too few distinct values for a
requirement's ``minValues``; it records ``NoCompatibleInstanceTypes`` on the NodePool
(pkg/controllers/provisioning/scheduling/scheduler.go). :func:`filtered_out` answers
that question for a :class:`NodePoolTemplate`, without any pod.
"""

from __future__ import annotations

from typing import Literal

from karpy.scheduling.instancetype import InstanceType
from karpy.scheduling.nodepool import NodePoolTemplate

__all__ = ["filtered_out"]


def _usable(instance_type: InstanceType, template: NodePoolTemplate) -> bool:
    requirements = template.requirements
    if instance_type.requirements.intersects(requirements) is not None:
        return False
    return any(o.available and o.requirements.overlaps(requirements)
               for o in instance_type.offerings)


def filtered_out(
    template: NodePoolTemplate, *, relax_min_values: bool = False
) -> Literal["requirements", "minValues"] | None:
    """``"requirements"`` when no instance type is compatible with the template and
    has an available compatible offering; ``"minValues"`` when the compatible ones
    carry fewer distinct values of a key than its ``minValues`` (unless relaxed, as
    MIN_VALUES_POLICY=BestEffort does); None when the NodePool can launch."""
    usable = [it for it in template.instance_types if _usable(it, template)]
    if not usable:
        return "requirements"
    if relax_min_values:
        return None
    for key in template.requirements:
        requirement = template.requirements[key]
        if requirement.min_values is None:
            continue
        values: set[str] = set()
        for it in usable:
            theirs = it.requirements.get(key)
            if theirs is not None and not theirs.complement:
                # only allowed values count (Karpenter v1.15.0 / v1.14.3)
                values.update(v for v in theirs.values if requirement.has(v))
        if len(values) < requirement.min_values:
            return "minValues"
    return None
