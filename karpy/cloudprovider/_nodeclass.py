"""Resolving a NodePool's ``nodeClassRef`` against a provider, and NodeClass readiness.

A provider declares the NodeClass kinds it serves (``supported_node_classes()``). A
NodePool whose ``nodeClassRef`` names another kind belongs to another provider and is
left alone, as Karpenter does. For a NodePool that is ours, the NodeClass object's own
``Ready`` condition decides the NodePool's ``NodeClassReady`` condition; the
nodepool controller reports it, using :func:`node_class_readiness`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from karpy.runtime import Kind

NODE_CLASS_READY = "NodeClassReady"
"""The NodePool condition type reporting whether its NodeClass is ready."""


@dataclass(frozen=True, slots=True)
class NodeClassReadiness:
    """The value of a NodePool's ``NodeClassReady`` condition."""

    status: Literal["True", "False"]
    reason: str
    message: str = ""

    @property
    def ready(self) -> bool:
        """True when the NodePool may launch nodes."""
        return self.status == "True"


def resolve_node_class(
    group: str, kind: str, supported: Sequence[Kind]
) -> Kind | None:
    """Return the supported kind a ``nodeClassRef`` (group, kind) names, or None.

    None means the NodePool is not this provider's: the core ignores it.
    """
    for candidate in supported:
        if candidate.group == group and candidate.kind == kind:
            return candidate
    return None


def node_class_readiness(node_class: Mapping[str, Any] | None) -> NodeClassReadiness:
    """Derive ``NodeClassReady`` from the NodeClass object (as a JSON-shaped mapping).

    ``None`` means the object does not exist. The reasons and messages are Karpenter's
    (pkg/controllers/nodepool/readiness), so ``kubectl describe nodepool`` reads the same.
    """
    if node_class is None:
        return NodeClassReadiness("False", "NodeClassNotFound", "NodeClass not found on cluster")
    if (node_class.get("metadata") or {}).get("deletionTimestamp"):
        return NodeClassReadiness("False", "NodeClassTerminating", "NodeClass is Terminating")
    conditions = (node_class.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    if ready is None or ready.get("status") not in ("True", "False"):
        return NodeClassReadiness(
            "False", "NodeClassReadinessUnknown", "Node Class Readiness Unknown"
        )
    if ready["status"] == "False":
        return NodeClassReadiness(
            "False", str(ready.get("reason") or "NotReady"), str(ready.get("message") or "")
        )
    return NodeClassReadiness("True", NODE_CLASS_READY)
