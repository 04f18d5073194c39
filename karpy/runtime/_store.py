"""The indexed object store behind each informer.

Objects are keyed ``namespace/name`` (``name`` for cluster-scoped kinds) and stored
read-only (see ``_objects``), so ``get``/``list`` hand out the stored objects without
copying. Indexes map a value (a namespace, an owner's uid, a node name, anything a
function computes) to the keys of the objects that have it, so "pods on node n" is a
dict lookup, not a scan.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ._objects import Object

__all__ = [
    "INDEX_NAMESPACE",
    "INDEX_NODE_NAME",
    "INDEX_OWNER",
    "IndexFunc",
    "Store",
    "index_by_field",
    "index_by_namespace",
    "index_by_node_name",
    "index_by_owner",
    "object_key",
]

IndexFunc = Callable[[Object], Iterable[str]]
"""Computes the index values of an object (an object may have several, or none)."""

INDEX_NAMESPACE = "namespace"
"""The index of objects by namespace (every informer has it)."""
INDEX_OWNER = "owner"
"""The conventional name for :func:`index_by_owner` (owners' UIDs); add it with ``indexers=``."""
INDEX_NODE_NAME = "spec.nodeName"
"""The conventional name for :func:`index_by_node_name` (a pod's ``spec.nodeName``)."""


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name``, or ``name`` when the object has no namespace."""
    meta = obj["metadata"]
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])


def index_by_namespace(obj: Object) -> Iterable[str]:
    """Index value: the object's namespace (nothing for cluster-scoped objects)."""
    ns = obj["metadata"].get("namespace")
    return (ns,) if ns else ()


def index_by_owner(obj: Object) -> Iterable[str]:
    """Index values: the uid of each owner in metadata.ownerReferences."""
    refs = obj["metadata"].get("ownerReferences") or ()
    return tuple(ref["uid"] for ref in refs if ref.get("uid"))


def index_by_node_name(obj: Object) -> Iterable[str]:
    """Index value: spec.nodeName (pods bound to a node)."""
    node = (obj.get("spec") or {}).get("nodeName")
    return (node,) if node else ()


def index_by_field(path: str) -> IndexFunc:
    """An index on the string value at a dotted ``path`` (e.g. ``spec.providerID``)."""
    parts = tuple(path.split("."))

    def index(obj: Object) -> Iterable[str]:
        cur: Any = obj
        for part in parts:
            if not isinstance(cur, Mapping):
                return ()
            cur = cur.get(part)
        return (str(cur),) if cur not in (None, "") else ()

    return index


class Store:
    """Objects of one kind by key, plus the indexes named in ``indexers``."""

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._items: dict[str, Object] = {}
        self._indexers: dict[str, IndexFunc] = dict(indexers or {})
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}
        self._values: dict[str, dict[str, tuple[str, ...]]] = {name: {} for name in self._indexers}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def get(self, key: str) -> Object | None:
        """The object stored under ``key`` (``namespace/name`` or ``name``), or None."""
        return self._items.get(key)

    def key_list(self) -> builtins.list[str]:
        """Every key (a new list)."""
        return list(self._items)

    def list(self) -> list[Object]:
        """Every object (a new list; the objects themselves are shared and read-only)."""
        return list(self._items.values())

    def by_index(self, index: str, value: str) -> builtins.list[Object]:
        """Objects whose ``index`` function returned ``value``."""
        try:
            keys = self._indices[index].get(value)
        except KeyError:
            raise KeyError(f"no index named {index!r}; known: {sorted(self._indices)}") from None
        if not keys:
            return []
        items = self._items
        return [items[k] for k in keys]

    def index_values(self, index: str) -> builtins.list[str]:
        """Every value currently present in ``index``."""
        return list(self._indices[index])

    def has_index(self, index: str) -> bool:
        """True if an indexer with that name exists."""
        return index in self._indexers

    def add_indexer(self, name: str, func: IndexFunc) -> None:
        """Add an index and build it over the objects already stored."""
        if name in self._indexers:
            if self._indexers[name] is func:
                return
            raise ValueError(f"index {name!r} exists already with another function")
        self._indexers[name] = func
        self._indices[name] = {}
        self._values[name] = {}
        for key, obj in self._items.items():
            self._index_one(name, func, key, obj)

    # -- mutation (the informer's alone) ---------------------------------------------------

    def put(self, obj: Object) -> Object | None:
        """Store ``obj``; return the object it replaced, if any."""
        key = object_key(obj)
        old = self._items.get(key)
        self._items[key] = obj
        for name, func in self._indexers.items():
            if old is not None:
                self._unindex_one(name, key)
            self._index_one(name, func, key, obj)
        return old

    def remove(self, key: str) -> Object | None:
        """Drop the object under ``key``; return it, if it was there."""
        old = self._items.pop(key, None)
        if old is not None:
            for name in self._indexers:
                self._unindex_one(name, key)
        return old

    def _index_one(self, name: str, func: IndexFunc, key: str, obj: Object) -> None:
        values = tuple(func(obj))
        if not values:
            return
        self._values[name][key] = values
        index = self._indices[name]
        for value in values:
            bucket = index.get(value)
            if bucket is None:
                index[value] = {key}
            else:
                bucket.add(key)

    def _unindex_one(self, name: str, key: str) -> None:
        values = self._values[name].pop(key, None)
        if not values:
            return
        index = self._indices[name]
        for value in values:
            bucket = index.get(value)
            if bucket is not None:
                bucket.discard(key)
                if not bucket:
                    del index[value]
