"""What the simulator needs of a NodePool: its node template, weight, limits, usage and
the instance types it may launch."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from karpy.apis.labels import LABEL_NODEPOOL, nodeclass_label_key
from karpy.scheduling import resources as res
from karpy.scheduling.instancetype import InstanceType
from karpy.scheduling.requirements import Requirements
from karpy.scheduling.taints import NodeTaint

__all__ = ["NODES", "NodePoolTemplate", "SharedLimit"]

#: The pseudo-resource of NodePool limits that caps the number of nodes.
NODES = "nodes"

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class SharedLimit:
    """Limits several NodePools share (karpy's ClusterLimit), as the simulator sees
    them: ``usage`` is what the machines of every pool they cover already use (capacity
    summed, plus ``nodes``). A NodeClaim of any of those pools must fit in what is left,
    as it must in its own pool's limits; the NodeClaims one solve plans for any of them
    count against the same remainder."""

    name: str
    limits: Mapping[str, int]
    usage: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "limits", MappingProxyType(dict(self.limits)))
        object.__setattr__(self, "usage", MappingProxyType(dict(self.usage)))


@dataclass(frozen=True, slots=True, eq=False)
class NodePoolTemplate:
    """A NodePool as the simulator sees it.

    ``requirements`` already include one ``In`` requirement per template label (as
    Karpenter's NodeClaimTemplate does). ``limits`` is None for an unlimited pool;
    ``usage`` is what the pool's existing nodes already use against the limits (the
    sum of their capacity, plus ``nodes``). ``shared_limits`` are the ClusterLimits
    that cover the pool, honoured like its own. Pools are tried by descending
    ``weight``, then by name.
    """

    name: str
    instance_types: Sequence[InstanceType]
    weight: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    requirements: Requirements = field(default_factory=Requirements)
    taints: tuple[NodeTaint, ...] = ()
    startup_taints: tuple[NodeTaint, ...] = ()
    limits: Mapping[str, int] | None = None
    usage: Mapping[str, int] = field(default_factory=dict)
    shared_limits: tuple[SharedLimit, ...] = ()

    def __post_init__(self) -> None:
        labels = {**self.labels, LABEL_NODEPOOL: self.name}
        object.__setattr__(self, "labels", MappingProxyType(labels))
        object.__setattr__(
            self, "requirements", self.requirements.intersect(Requirements.from_labels(labels))
        )
        object.__setattr__(self, "instance_types", tuple(self.instance_types))
        object.__setattr__(self, "usage", MappingProxyType(dict(self.usage)))
        object.__setattr__(self, "shared_limits", tuple(self.shared_limits))
        if self.limits is not None:
            object.__setattr__(self, "limits", MappingProxyType(dict(self.limits)))

    @classmethod
    def from_nodepool_dict(
        cls,
        nodepool: Mapping[str, Any],
        instance_types: Iterable[InstanceType],
        *,
        usage: Mapping[str, int] | None = None,
        shared_limits: Iterable[SharedLimit] = (),
    ) -> NodePoolTemplate:
        """From a Karpenter v1 NodePool dict (camelCase keys as the API returns it)."""
        metadata = nodepool.get("metadata") or {}
        spec = nodepool.get("spec") or {}
        template = spec.get("template") or {}
        template_spec = template.get("spec") or {}
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        ref = template_spec.get("nodeClassRef") or {}
        if ref.get("group") and ref.get("kind") and ref.get("name"):
            labels[nodeclass_label_key(ref["group"], ref["kind"])] = ref["name"]
        raw_limits = spec.get("limits")
        limits = None
        if raw_limits:
            limits = res.parse_resource_list(raw_limits)
        return cls(
            name=metadata.get("name") or "",
            instance_types=tuple(instance_types),
            weight=int(spec.get("weight") or 0),
            labels=labels,
            requirements=Requirements.from_node_selector(template_spec.get("requirements")),
            taints=tuple(NodeTaint.from_dict(t) for t in template_spec.get("taints") or ()),
            startup_taints=tuple(
                NodeTaint.from_dict(t) for t in template_spec.get("startupTaints") or ()
            ),
            limits=limits,
            usage=usage or {},
            shared_limits=tuple(shared_limits),
        )
