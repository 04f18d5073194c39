"""Nodes that exist already (or are in flight): what pods could still go there."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar, cast

from karpy.apis.labels import LABEL_HOSTNAME
from karpy.scheduling import resources as res
from karpy.scheduling.pod import Pod
from karpy.scheduling.requirements import Requirements
from karpy.scheduling.taints import EPHEMERAL_TAINTS, NodeTaint

__all__ = ["ExistingNode", "nodeclaim_labels"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})

T = TypeVar("T")


def nodeclaim_labels(nodeclaim: Mapping[str, Any]) -> dict[str, str]:
    """The labels a NodeClaim's node will carry, as far as known before it launches: its
    own labels plus every requirement narrowed to a single ``In`` value."""
    labels = dict((nodeclaim.get("metadata") or {}).get("labels") or {})
    for requirement in (nodeclaim.get("spec") or {}).get("requirements") or ():
        values = list(requirement.get("values") or ())
        if requirement.get("operator") == "In" and len(values) == 1:
            labels.setdefault(requirement["key"], values[0])
    return labels


@dataclass(frozen=True, slots=True, eq=False)
class ExistingNode:
    """A node, or an in-flight NodeClaim that has no node yet, and the pods bound to it.

    ``taints`` are the taints pods must tolerate. For a node that is not ``initialized``
    the startup taints and the well-known ephemeral taints (not-ready, uninitialized ...)
    are ignored, because they will go away. ``schedulable=False`` keeps pods off the
    node (cordoned, being deleted) while its pods still count for topology.
    """

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[NodeTaint, ...] = ()
    allocatable: Mapping[str, int] = field(default_factory=dict)
    capacity: Mapping[str, int] = field(default_factory=dict)
    pods: tuple[Pod, ...] = ()
    startup_taints: tuple[NodeTaint, ...] = ()
    initialized: bool = True
    schedulable: bool = True
    nodepool: str = ""
    volume_limits: Mapping[str, int | None] = field(default_factory=dict)
    """Volume attachment limits per CSI driver as the node's CSINode publishes them
    (None: the driver is published without a limit); a driver not listed falls back
    to the instance type's limit, as Karpenter's VolumeUsage does."""
    attached: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """The volumes the bound pods attach, per CSI driver (``namespace/claim`` IDs)."""
    # Derived once per node and kept: disruption asks hundreds of what-if questions of
    # the same nodes in one pass, and re-deriving these per solve dominated its cost.
    _memo: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))
        object.__setattr__(self, "allocatable", MappingProxyType(dict(self.allocatable)))
        object.__setattr__(
            self, "capacity", MappingProxyType(dict(self.capacity or self.allocatable))
        )
        object.__setattr__(self, "pods", tuple(self.pods))

    @classmethod
    def from_node_dict(
        cls,
        node: Mapping[str, Any],
        pods: Iterable[Pod] = (),
        *,
        startup_taints: Iterable[NodeTaint] = (),
        initialized: bool | None = None,
    ) -> ExistingNode:
        """From a Kubernetes Node dict and the pods bound to it.

        ``initialized`` defaults to the ``karpenter.sh/initialized`` label (nodes without
        it, i.e. not managed by karpy, count as initialized).
        """
        metadata = node.get("metadata") or {}
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        labels: Mapping[str, str] = metadata.get("labels") or {}
        if initialized is None:
            managed = "karpenter.sh/nodepool" in labels
            initialized = not managed or labels.get("karpenter.sh/initialized") == "true"
        return cls(
            name=metadata.get("name") or "",
            labels=labels,
            taints=tuple(NodeTaint.from_dict(t) for t in spec.get("taints") or ()),
            allocatable=res.parse_resource_list(status.get("allocatable")),
            capacity=res.parse_resource_list(status.get("capacity")),
            pods=tuple(pods),
            startup_taints=tuple(startup_taints),
            initialized=initialized,
            schedulable=not spec.get("unschedulable", False),
            nodepool=labels.get("karpenter.sh/nodepool", ""),
        )

    @classmethod
    def from_nodeclaim_dict(
        cls,
        nodeclaim: Mapping[str, Any],
        pods: Iterable[Pod] = (),
        *,
        allocatable: Mapping[str, int] | None = None,
    ) -> ExistingNode:
        """An in-flight NodeClaim (launched, no Node yet) as capacity pods may use.

        Its labels are the NodeClaim's labels plus every requirement narrowed to one
        value; its allocatable comes from ``status.allocatable`` unless given (the
        instance type's, before launch). It is not initialized, so startup taints do not
        keep pods off it.
        """
        metadata = nodeclaim.get("metadata") or {}
        spec = nodeclaim.get("spec") or {}
        status = nodeclaim.get("status") or {}
        labels = nodeclaim_labels(nodeclaim)
        if allocatable is None:
            allocatable = res.parse_resource_list(status.get("allocatable"))
        return cls(
            name=status.get("nodeName") or metadata.get("name") or "",
            labels=labels,
            taints=tuple(NodeTaint.from_dict(t) for t in spec.get("taints") or ()),
            allocatable=allocatable,
            capacity=res.parse_resource_list(status.get("capacity")) or allocatable,
            pods=tuple(pods),
            startup_taints=tuple(NodeTaint.from_dict(t) for t in spec.get("startupTaints") or ()),
            initialized=False,
            nodepool=labels.get("karpenter.sh/nodepool", ""),
        )

    @property
    def hostname(self) -> str:
        """The node's hostname label, or its name when the label is missing (not yet
        registered), which is how topology counts it."""
        return self.labels.get(LABEL_HOSTNAME) or self.name

    @property
    def requirements(self) -> Requirements:
        """The node's labels as requirements (computed once)."""
        found = self._memo.get("labels")
        if found is None:
            found = self._memo["labels"] = Requirements.from_labels(self.labels)
        return cast(Requirements, found)

    def memo(self, key: Any, compute: Callable[[], T]) -> T:
        """A value derived from this (immutable) node, computed once per ``key``."""
        try:
            return cast(T, self._memo[key])
        except KeyError:
            value = self._memo[key] = compute()
            return value

    def effective_taints(self) -> tuple[NodeTaint, ...]:
        """The taints that keep pods off this node now and later (see class docstring)."""
        if self.initialized:
            return self.taints
        ignored = (*self.startup_taints, *EPHEMERAL_TAINTS)
        return tuple(
            t
            for t in self.taints
            if not any(t.matches(i) and (i.value == t.value or not i.value) for i in ignored)
            and not t.key.startswith("readiness.k8s.io/")
        )
