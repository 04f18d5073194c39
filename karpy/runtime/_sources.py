"""Sources: how informer events become keys in a controller's work queue.

A source is attached when its controller starts and detached when it stops. The three
controller-runtime shapes are here: the primary kind enqueues the object itself
(:func:`enqueue_object`), an owned kind enqueues its controlling owner
(:func:`enqueue_owner`), and any kind can enqueue what a map function returns.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Generic, Protocol, TypeVar

from ._informer import HandlerRegistration, Informer
from ._objects import Object
from ._predicates import Predicate
from ._reconcile import Request
from ._workqueue import WorkQueue
from .kinds import Kind

__all__ = [
    "InformerSource",
    "MapFunc",
    "Source",
    "enqueue_object",
    "enqueue_owner",
]

K = TypeVar("K", bound=Hashable)

MapFunc = Callable[[Object], Iterable[Request]]
"""Maps an object to the requests it should trigger (may return none)."""


class Source(Protocol[K]):
    """Feeds a work queue while attached."""

    def attach(self, queue: WorkQueue[K]) -> Callable[[], None]:
        """Start feeding ``queue``; return a function that stops it."""
        ...


def enqueue_object(obj: Object) -> Iterable[Request]:
    """The request of the object itself (for the primary kind)."""
    return (Request.of(obj),)


def enqueue_owner(owner: Kind, *, only_controller: bool = True) -> MapFunc:
    """Requests for the owners of kind ``owner`` in metadata.ownerReferences.

    By default only the controlling owner (``controller: true``) counts, as with
    controller-runtime's ``Owns``.
    """
    group = owner.group

    def owners(obj: Object) -> Iterable[Request]:
        meta = obj["metadata"]
        refs = meta.get("ownerReferences")
        if not refs:
            return ()
        namespace = (meta.get("namespace") or "") if owner.namespaced else ""
        out = []
        for ref in refs:
            if ref.get("kind") != owner.kind:
                continue
            api_version = str(ref.get("apiVersion", ""))
            ref_group = api_version.rpartition("/")[0]
            if ref_group != group:
                continue
            if only_controller and not ref.get("controller"):
                continue
            out.append(Request(namespace, ref["name"]))
        return out

    return owners


class _Enqueue(Generic[K]):
    """The EventHandler a source installs: filter with the predicate, map, enqueue."""

    __slots__ = ("_map", "_predicate", "_queue")

    def __init__(
        self, queue: WorkQueue[K], map_fn: Callable[[Object], Iterable[K]], predicate: Predicate
    ) -> None:
        self._queue = queue
        self._map = map_fn
        self._predicate = predicate

    def on_add(self, obj: Object) -> None:
        if self._predicate.create(obj):
            for key in self._map(obj):
                self._queue.add(key)

    def on_update(self, old: Object, new: Object) -> None:
        if self._predicate.update(old, new):
            keys = set(self._map(old))
            keys.update(self._map(new))
            for key in keys:
                self._queue.add(key)

    def on_delete(self, obj: Object) -> None:
        if self._predicate.delete(obj):
            for key in self._map(obj):
                self._queue.add(key)


class InformerSource(Generic[K]):
    """Events of a (shared) informer, filtered by ``predicate`` and mapped to keys."""

    def __init__(
        self,
        informer: Informer,
        map_fn: Callable[[Object], Iterable[K]],
        predicate: Predicate | None = None,
    ) -> None:
        self.informer = informer
        self._map = map_fn
        self._predicate = predicate or Predicate()

    def attach(self, queue: WorkQueue[K]) -> Callable[[], None]:
        registration: HandlerRegistration = self.informer.add_handler(
            _Enqueue(queue, self._map, self._predicate)
        )
        return lambda: self.informer.remove_handler(registration)


class StaticSource(Generic[K]):
    """Enqueues fixed keys once, when attached (how singleton controllers start)."""

    def __init__(self, *keys: K) -> None:
        self._keys = keys

    def attach(self, queue: WorkQueue[K]) -> Callable[[], None]:
        for key in self._keys:
            queue.add(key)
        return lambda: None
