"""ClusterLimits (``karpy.dev/v1alpha1``), parsed as they arrive, and the NodePools each
covers.

A ClusterLimit selects NodePools by their labels; what it counts is the sum of those
pools' usage (:meth:`karpy.state.Cluster.nodepool_usage`), so it is never kept apart:
:meth:`karpy.state.Cluster.shared_limits` adds it up when asked, from the same numbers
the pools' own limits are checked against. The kind is karpy's, not Karpenter's: a
cluster whose API server does not serve it (Karpenter's CRDs only) has none, and
:func:`serves_cluster_limits` tells the operator whether to watch it at all.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from pydantic import ValidationError

from karpy.apis.karpydev import ClusterLimit
from karpy.apis.model import validation_problems
from karpy.runtime import Client, Kind, Object, errors
from karpy.scheduling import resources as res
from karpy.scheduling.selectors import LabelMatcher

__all__ = [
    "CLUSTER_LIMIT",
    "ClusterLimitEntry",
    "ClusterLimits",
    "serves_cluster_limits",
]

log = logging.getLogger("karpy.state")

CLUSTER_LIMIT: Final = Kind(
    group="karpy.dev", version="v1alpha1", plural="clusterlimits", kind="ClusterLimit",
    namespaced=False,
)
"""karpy's ClusterLimit, for API calls and watches."""


@dataclass(frozen=True, slots=True)
class ClusterLimitEntry:
    """A ClusterLimit as the model keeps it: the cached object, its limits in base
    units and its compiled selector; ``error`` (and no limits) when it does not parse."""

    raw: Object
    limits: Mapping[str, int]
    selector: LabelMatcher | None
    error: str | None = None

    @property
    def name(self) -> str:
        """The ClusterLimit's name."""
        return str(self.raw["metadata"]["name"])

    def selects(self, nodepool: Mapping[str, Any]) -> bool:
        """Whether the NodePool object's labels are selected (never, when invalid)."""
        if self.selector is None:
            return False
        labels = (nodepool.get("metadata") or {}).get("labels") or {}
        return self.selector.matches(labels)


def parse(obj: Object) -> ClusterLimitEntry:
    """``obj`` parsed; an entry carrying the one-line error when it does not validate."""
    try:
        model = ClusterLimit.from_dict(obj)
        limits = res.parse_resource_list(model.spec.limits)
        raw_selector = (obj.get("spec") or {}).get("nodePoolSelector") or {}
        for expression in raw_selector.get("matchExpressions") or ():
            values = expression.get("values") or []
            if expression.get("operator") in ("In", "NotIn") and not values:
                raise ValueError(
                    f"spec.nodePoolSelector.matchExpressions: {expression.get('key')}: "
                    f"values must be non-empty for {expression.get('operator')}")
            if expression.get("operator") in ("Exists", "DoesNotExist") and values:
                raise ValueError(
                    f"spec.nodePoolSelector.matchExpressions: {expression.get('key')}: "
                    f"values must be empty for {expression.get('operator')}")
        selector = LabelMatcher.from_dict(raw_selector)
    except ValidationError as exc:
        return ClusterLimitEntry(obj, MappingProxyType({}), None,
                                 "; ".join(validation_problems(exc)))
    except ValueError as exc:
        return ClusterLimitEntry(obj, MappingProxyType({}), None, str(exc))
    return ClusterLimitEntry(obj, MappingProxyType(limits), selector)


class ClusterLimits:
    """Every ClusterLimit, by name, parsed once per change."""

    def __init__(self) -> None:
        self._entries: dict[str, ClusterLimitEntry] = {}

    def update(self, obj: Object) -> None:
        """A ClusterLimit was added or changed."""
        entry = parse(obj)
        if entry.error is not None:
            log.error("ignoring invalid clusterlimit",
                      extra={"ClusterLimit": {"name": entry.name}, "error": entry.error})
        self._entries[entry.name] = entry

    def delete(self, obj: Object) -> None:
        """A ClusterLimit is gone."""
        self._entries.pop(str(obj["metadata"]["name"]), None)

    def entries(self) -> list[ClusterLimitEntry]:
        """Every ClusterLimit, by name."""
        return [self._entries[name] for name in sorted(self._entries)]

    def get(self, name: str) -> ClusterLimitEntry | None:
        """The ClusterLimit called ``name``, if known."""
        return self._entries.get(name)

    def __bool__(self) -> bool:
        return bool(self._entries)


async def serves_cluster_limits(client: Client) -> bool:
    """Whether the API server serves ClusterLimits (karpy's CRDs are installed): only
    then is the kind watched. A cluster with Karpenter's CRDs alone answers 404, and
    karpy runs as Karpenter does, without them; it says so once."""
    try:
        await client.list(CLUSTER_LIMIT, live=True)
    except errors.NotFound:
        log.info("the ClusterLimit CRD (karpy.dev) is not installed: limits across "
                 "NodePools are off; install karpy-crd and restart to use them")
        return False
    except errors.Forbidden as exc:
        log.warning("clusterlimits.karpy.dev cannot be listed: limits across NodePools "
                    "are off; grant list and watch on them and restart",
                    extra={"error": str(exc)})
        return False
    return True
