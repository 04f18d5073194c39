"""Where a pod's volumes can be mounted, as requirement alternatives.

A bound PersistentVolume's ``spec.nodeAffinity.required`` and an unbound claim's
StorageClass ``allowedTopologies`` (for ``WaitForFirstConsumer`` binding) both restrict
the nodes -- in practice the zones -- a pod can run in. Each is a list of OR'ed terms;
a pod with several volumes needs one term of every volume at once, so the alternatives
are the compatible combinations. The caller (the provisioner) resolves a pod's claims
to PVs and StorageClasses and passes the result to ``Pod.from_dict(...,
volume_requirements=...)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from karpy.scheduling.requirements import IN, Requirement, Requirements

__all__ = ["combine", "from_persistent_volume", "from_storage_class"]


def from_persistent_volume(volume: Mapping[str, Any]) -> list[Requirements]:
    """The alternatives a bound PersistentVolume allows (empty: no restriction)."""
    required = ((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
    return [
        Requirements.from_node_selector(term.get("matchExpressions"))
        for term in required.get("nodeSelectorTerms") or ()
    ]


def from_storage_class(storage_class: Mapping[str, Any]) -> list[Requirements]:
    """The alternatives a StorageClass's ``allowedTopologies`` allow (empty: any)."""
    out = []
    for term in storage_class.get("allowedTopologies") or ():
        out.append(
            Requirements(
                Requirement.new(expression["key"], IN, expression.get("values") or ())
                for expression in term.get("matchLabelExpressions") or ()
            )
        )
    return out


def combine(per_volume: Iterable[Sequence[Requirements]]) -> list[Requirements]:
    """Alternatives for a pod from each volume's alternatives: one term per volume,
    keeping only combinations that can hold together. An empty result means the
    volumes restrict nothing; if no combination is possible every combination is kept,
    so the pod fails with the conflict spelled out rather than silently."""
    alternatives: list[Requirements] = [Requirements()]
    restricted = False
    for options in per_volume:
        if not options:
            continue
        restricted = True
        merged = [
            existing.intersect(option)
            for existing in alternatives
            for option in options
            if existing.intersects(option) is None
        ]
        if not merged:
            merged = [existing.intersect(option) for existing in alternatives for option in options]
        alternatives = merged
    return alternatives if restricted else []
