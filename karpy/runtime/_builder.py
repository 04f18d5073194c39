"""The single entry point for object controllers: ``manager.controller(name)...complete(r)``.

::

    (manager.controller("replicaset")
        .for_(kinds.REPLICA_SET)                       # reconcile ReplicaSets
        .owns(kinds.POD)                               # ...when a pod they control changes
        .watches(kinds.NODE, pods_on_node)             # ...and for what a node event maps to
        .complete(ReplicaSetReconciler(manager.client), workers=4))

Every kind named here gets the cache's shared informer; the watches are attached when
the controller starts (after leader election) and detached when it stops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from ._controller import Controller
from ._predicates import Predicate
from ._reconcile import Reconciler, Request
from ._sources import InformerSource, MapFunc, enqueue_object, enqueue_owner
from .kinds import Kind

if TYPE_CHECKING:
    from ._manager import Manager

__all__ = ["ControllerBuilder"]


class ControllerBuilder:
    """Collects a controller's watches, then builds and registers it (``complete``)."""

    def __init__(self, manager: Manager, name: str) -> None:
        self._manager = manager
        self._name = name
        self._for: Kind | None = None
        self._watches: list[tuple[Kind, MapFunc, Predicate | None]] = []

    def for_(self, kind: Kind, *, predicate: Predicate | None = None) -> Self:
        """The primary kind: each event enqueues the object's own Request."""
        if self._for is not None:
            raise ValueError(f"controller {self._name!r}: for_() was called already")
        self._for = kind
        self._watches.append((kind, enqueue_object, predicate))
        return self

    def owns(
        self, kind: Kind, *, predicate: Predicate | None = None, only_controller: bool = True
    ) -> Self:
        """An owned kind: each event enqueues the owning primary object (needs ``for_``)."""
        if self._for is None:
            raise ValueError(f"controller {self._name!r}: call for_() before owns()")
        self._watches.append(
            (kind, enqueue_owner(self._for, only_controller=only_controller), predicate)
        )
        return self

    def watches(self, kind: Kind, map_fn: MapFunc, *, predicate: Predicate | None = None) -> Self:
        """Any kind: each event enqueues the Requests ``map_fn(obj)`` returns."""
        self._watches.append((kind, map_fn, predicate))
        return self

    def complete(self, reconciler: Reconciler[Request], **options: Any) -> Controller[Request]:
        """Build the controller, register it with the manager and return it.

        ``options`` are Controller keyword arguments: ``workers``, ``reconcile_timeout``,
        ``drain_timeout``, ``rate_limiter``, ``needs_leader_election``.
        """
        if not self._watches:
            raise ValueError(f"controller {self._name!r} watches nothing: call for_()/watches()")
        manager = self._manager
        # Leave part of the manager's shutdown budget for releasing the lease.
        options.setdefault("drain_timeout", 0.8 * manager.graceful_shutdown_timeout)
        controller: Controller[Request] = Controller(
            self._name, reconciler, clock=manager.clock, metrics=manager.metrics, **options
        )
        for kind, map_fn, predicate in self._watches:
            controller.watch(InformerSource(manager.cache.informer(kind), map_fn, predicate))
        manager.add(controller)
        return controller
