"""Taints and tolerations, matched the way kube-scheduler's TaintToleration plugin does.

Only ``NoSchedule`` and ``NoExecute`` taints keep a pod off a node. ``PreferNoSchedule``
is a preference: the simulator treats it as binding until relaxation tolerates it, as
Karpenter does, so pods avoid such nodes when they can.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "EPHEMERAL_TAINTS",
    "NO_EXECUTE",
    "NO_SCHEDULE",
    "PREFER_NO_SCHEDULE",
    "NodeTaint",
    "Toleration",
    "untolerated",
]

NO_SCHEDULE: Final = "NoSchedule"
NO_EXECUTE: Final = "NoExecute"
PREFER_NO_SCHEDULE: Final = "PreferNoSchedule"


@dataclass(frozen=True, slots=True)
class NodeTaint:
    """A node taint as the simulator matches it: ``key=value:effect``, a plain frozen
    value. (The CRD field model of a taint, in NodeClaim/NodePool specs, is
    :class:`karpy.apis.Taint`; :meth:`from_dict` reads either's JSON form.)"""

    key: str
    effect: str
    value: str = ""

    @classmethod
    def from_dict(cls, taint: Mapping[str, Any]) -> NodeTaint:
        """From a Kubernetes taint dict (``{key, value, effect}``)."""
        return cls(key=taint["key"], effect=taint.get("effect", ""), value=taint.get("value") or "")

    def to_dict(self) -> dict[str, str]:
        """As a Kubernetes taint dict."""
        out = {"key": self.key, "effect": self.effect}
        if self.value:
            out["value"] = self.value
        return out

    def matches(self, other: NodeTaint) -> bool:
        """Same key and effect (how Kubernetes identifies a taint on a node)."""
        return self.key == other.key and self.effect == other.effect

    def __str__(self) -> str:
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration. An empty key with ``Exists`` tolerates every taint; an empty
    effect tolerates every effect."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    @classmethod
    def from_dict(cls, toleration: Mapping[str, Any]) -> Toleration:
        """From a Kubernetes toleration dict."""
        return cls(
            key=toleration.get("key") or "",
            operator=toleration.get("operator") or "Equal",
            value=toleration.get("value") or "",
            effect=toleration.get("effect") or "",
        )

    def tolerates(self, taint: NodeTaint) -> bool:
        """Whether this toleration tolerates ``taint`` (k8s ``Toleration.ToleratesTaint``)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator == "Equal":
            return self.value == taint.value
        number, other = _as_int(self.value), _as_int(taint.value)
        if number is None or other is None:
            return False
        if self.operator == "Gt":
            return other > number
        if self.operator == "Lt":
            return other < number
        return False


def _as_int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


def untolerated(
    taints: Iterable[NodeTaint], tolerations: Sequence[Toleration], *, prefer: bool = True
) -> NodeTaint | None:
    """The first taint the tolerations do not tolerate, or None when all are tolerated.

    With ``prefer=False`` PreferNoSchedule taints are ignored (they are only a
    preference); with the default they count, until relaxation tolerates them.
    """
    for taint in taints:
        if not prefer and taint.effect == PREFER_NO_SCHEDULE:
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


#: Taints a node carries while it starts; ignored on nodes that are not initialized yet
#: (Karpenter's KnownEphemeralTaints).
EPHEMERAL_TAINTS: Final = (
    NodeTaint("node.kubernetes.io/not-ready", NO_SCHEDULE),
    NodeTaint("node.kubernetes.io/not-ready", NO_EXECUTE),
    NodeTaint("node.kubernetes.io/unreachable", NO_SCHEDULE),
    NodeTaint("node.cloudprovider.kubernetes.io/uninitialized", NO_SCHEDULE, "true"),
    NodeTaint("karpenter.sh/unregistered", NO_EXECUTE),
)
