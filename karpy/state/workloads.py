"""The selectors kube-scheduler deduces default topology spread selectors from: every
Service's ``spec.selector`` per namespace, and the selectors of ReplicationControllers,
ReplicaSets and StatefulSets by namespace and name (helper.DefaultSelector).

Fed by informers only where ``SCHEDULER_CONFIG`` sets default constraints (the only
reader); :meth:`WorkloadSelectors.selector_for` answers for a pod with dict lookups and a
scan of its namespace's Services, cached per (namespace, controller, labels) until an
object changes, as Karpenter's injector caches per pod shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from karpy.runtime import Object
from karpy.scheduling import Pod
from karpy.scheduling.defaultspread import default_selector

__all__ = ["OWNER_KINDS", "WorkloadSelectors"]

OWNER_KINDS = ("ReplicationController", "ReplicaSet", "StatefulSet")


def _key(obj: Object) -> tuple[str, str]:
    meta = obj["metadata"]
    return str(meta.get("namespace") or "default"), str(meta["name"])


class WorkloadSelectors:
    """Service and controller selectors, as their watch events arrive."""

    def __init__(self) -> None:
        self._services: dict[str, dict[str, Mapping[str, str] | None]] = {}
        self._owners: dict[tuple[str, str, str], Mapping[str, Any]] = {}
        self._cache: dict[tuple[Any, ...], Mapping[str, Any] | None] = {}

    def update_service(self, service: Object) -> None:
        """A Service was added or changed."""
        namespace, name = _key(service)
        selector = (service.get("spec") or {}).get("selector")
        self._services.setdefault(namespace, {})[name] = (
            MappingProxyType(dict(selector)) if selector is not None else None)
        self._cache.clear()

    def delete_service(self, service: Object) -> None:
        """A Service is gone."""
        namespace, name = _key(service)
        self._services.get(namespace, {}).pop(name, None)
        self._cache.clear()

    def update_owner(self, kind: str, owner: Object) -> None:
        """A ReplicationController, ReplicaSet or StatefulSet was added or changed."""
        namespace, name = _key(owner)
        selector = (owner.get("spec") or {}).get("selector") or {}
        if self._owners.get((kind, namespace, name)) != selector:
            self._owners[(kind, namespace, name)] = selector
            self._cache.clear()

    def delete_owner(self, kind: str, owner: Object) -> None:
        """A ReplicationController, ReplicaSet or StatefulSet is gone."""
        namespace, name = _key(owner)
        if self._owners.pop((kind, namespace, name), None) is not None:
            self._cache.clear()

    def selector_for(self, pod: Pod) -> Mapping[str, Any] | None:
        """The selector kube-scheduler deduces for ``pod`` (None: none can be)."""
        key = (pod.namespace, pod.controller, frozenset(pod.labels.items()))
        if key in self._cache:
            return self._cache[key]
        owner = None
        if pod.controller is not None:
            kind, name = pod.controller
            found = self._owners.get((kind, pod.namespace, name))
            if found is not None:
                owner = (kind, found)
        services = self._services.get(pod.namespace, {}).values()
        selector = default_selector(pod.labels, services, owner)
        self._cache[key] = selector
        return selector
