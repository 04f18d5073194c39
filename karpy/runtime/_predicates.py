"""Event handlers and predicates: what an informer calls, and how events are filtered.

An :class:`EventHandler` receives add/update/delete callbacks from an informer. They are
synchronous and must not block: a handler's job is to enqueue a key, not to do work.

A :class:`Predicate` filters events before a handler sees them. Each of its three
functions defaults to "let it through"; combine with ``&``, ``|`` and ``~``::

    GENERATION_CHANGED | LABELS_CHANGED
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ._objects import Object

__all__ = [
    "ANNOTATIONS_CHANGED",
    "GENERATION_CHANGED",
    "LABELS_CHANGED",
    "RESOURCE_VERSION_CHANGED",
    "EventHandler",
    "FuncHandler",
    "Predicate",
    "predicate_from",
]


class EventHandler(Protocol):
    """Receives an informer's events. Must not block or await."""

    def on_add(self, obj: Object) -> None:
        """An object appeared (first list, a watch ADDED, or a replay to a new handler)."""

    def on_update(self, old: Object, new: Object) -> None:
        """An object changed (``old`` is the previously cached version)."""

    def on_delete(self, obj: Object) -> None:
        """An object disappeared (``obj`` is its last known state)."""


def _noop1(obj: Object) -> None:
    return None


def _noop2(old: Object, new: Object) -> None:
    return None


@dataclass(frozen=True, slots=True)
class FuncHandler:
    """An EventHandler made of up to three plain functions."""

    add: Callable[[Object], None] = _noop1
    update: Callable[[Object, Object], None] = _noop2
    delete: Callable[[Object], None] = _noop1

    def on_add(self, obj: Object) -> None:
        self.add(obj)

    def on_update(self, old: Object, new: Object) -> None:
        self.update(old, new)

    def on_delete(self, obj: Object) -> None:
        self.delete(obj)


def _yes1(obj: Object) -> bool:
    return True


def _yes2(old: Object, new: Object) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Predicate:
    """Which events pass: ``create(obj)``, ``update(old, new)``, ``delete(obj)``."""

    create: Callable[[Object], bool] = _yes1
    update: Callable[[Object, Object], bool] = _yes2
    delete: Callable[[Object], bool] = _yes1

    def __and__(self, other: Predicate) -> Predicate:
        return Predicate(
            create=lambda o: self.create(o) and other.create(o),
            update=lambda a, b: self.update(a, b) and other.update(a, b),
            delete=lambda o: self.delete(o) and other.delete(o),
        )

    def __or__(self, other: Predicate) -> Predicate:
        return Predicate(
            create=lambda o: self.create(o) or other.create(o),
            update=lambda a, b: self.update(a, b) or other.update(a, b),
            delete=lambda o: self.delete(o) or other.delete(o),
        )

    def __invert__(self) -> Predicate:
        return Predicate(
            create=lambda o: not self.create(o),
            update=lambda a, b: not self.update(a, b),
            delete=lambda o: not self.delete(o),
        )


def predicate_from(test: Callable[[Object], bool]) -> Predicate:
    """A predicate applying ``test`` to the object of every event (the new one on update)."""
    return Predicate(create=test, update=lambda old, new: test(new), delete=test)


def _meta(obj: Mapping[str, Any], field: str) -> Any:
    return obj.get("metadata", {}).get(field)


GENERATION_CHANGED = Predicate(
    update=lambda old, new: _meta(old, "generation") != _meta(new, "generation")
)
"""Updates pass only if metadata.generation changed (spec edits, not status writes)."""

LABELS_CHANGED = Predicate(
    update=lambda old, new: (_meta(old, "labels") or {}) != (_meta(new, "labels") or {})
)
"""Updates pass only if the labels changed."""

ANNOTATIONS_CHANGED = Predicate(
    update=lambda old, new: (_meta(old, "annotations") or {}) != (_meta(new, "annotations") or {})
)
"""Updates pass only if the annotations changed."""

RESOURCE_VERSION_CHANGED = Predicate(
    update=lambda old, new: _meta(old, "resourceVersion") != _meta(new, "resourceVersion")
)
"""Updates pass only if the resourceVersion changed (drops no-op relist updates)."""
