"""The cache: one shared informer per kind, and reads answered from their stores.

However many controllers watch Pods, there is one Pod informer, one watch connection
and one copy of each Pod in memory. ``Cache.informer(kind)`` returns the existing
informer or creates it; informers created while the cache runs are started at once.

The cache is also a client ``Reader``: ``get``/``list`` on a synced kind are served from
memory (read-only objects); kinds without a synced informer go to the server.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ._client import Selector
from ._informer import Informer
from ._objects import Object
from ._protocol import ListerWatcher
from ._selectors import FieldQuery, LabelQuery
from ._store import INDEX_NAMESPACE, IndexFunc
from .errors import NotFound
from .kinds import Kind

__all__ = ["Cache", "InformerOptions"]


@dataclass(frozen=True, slots=True)
class InformerOptions:
    """Per-kind restrictions for the shared informer (server-side filtering)."""

    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    indexers: Mapping[str, IndexFunc] = field(default_factory=dict)


class Cache:
    """Shared informers keyed by kind; a ``Reader`` over their stores.

    ``by_kind`` restricts what some kinds' informers watch (e.g. only pods with a
    ``spec.nodeName``); ``namespace`` restricts every namespaced kind to one namespace.
    """

    def __init__(
        self,
        client: ListerWatcher,
        *,
        namespace: str | None = None,
        by_kind: Mapping[Kind, InformerOptions] | None = None,
        strip_managed_fields: bool = True,
        on_handler_error: Callable[[str, str], None] | None = None,
    ) -> None:
        self._client = client
        self._on_handler_error = on_handler_error
        self._namespace = namespace
        self._by_kind = dict(by_kind or {})
        self._strip = strip_managed_fields
        self._informers: dict[Kind, Informer] = {}
        self._created = asyncio.Event()
        self._running = False

    def __repr__(self) -> str:
        return f"Cache(kinds={[str(k) for k in self._informers]})"

    # -- informers ---------------------------------------------------------------------

    def informer(self, kind: Kind, *, indexers: Mapping[str, IndexFunc] | None = None) -> Informer:
        """The shared informer of ``kind`` (created on first use; started if running).

        ``indexers`` are added to it (an index name already present must map to the
        same function).
        """
        informer = self._informers.get(kind)
        if informer is None:
            options = self._by_kind.get(kind, InformerOptions())
            namespace = options.namespace or (self._namespace if kind.namespaced else None)
            informer = Informer(
                self._client,
                kind,
                namespace=namespace,
                label_selector=options.label_selector,
                field_selector=options.field_selector,
                indexers=options.indexers,
                strip_managed_fields=self._strip,
                on_handler_error=self._on_handler_error,
            )
            self._informers[kind] = informer
            self._created.set()
        for name, func in (indexers or {}).items():
            informer.add_indexer(name, func)
        return informer

    def informers(self) -> builtins.list[Informer]:
        """Every informer created so far."""
        return list(self._informers.values())

    @property
    def synced(self) -> bool:
        """True if every informer created so far has completed its first list."""
        return all(i.has_synced for i in self._informers.values())

    async def wait_for_sync(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Wait until every informer created so far has synced (``TimeoutError`` if not)."""
        async with asyncio.timeout(timeout):
            for informer in list(self._informers.values()):
                await informer.wait_for_sync()

    async def run(self) -> None:
        """Run every informer, including ones created later, until cancelled."""
        if self._running:
            raise RuntimeError("cache is already running")
        self._running = True
        started: set[Kind] = set()
        try:
            async with asyncio.TaskGroup() as tg:
                while True:
                    self._created.clear()
                    for kind, informer in list(self._informers.items()):
                        if kind not in started:
                            started.add(kind)
                            tg.create_task(informer.run(), name=f"informer:{kind}")
                    await self._created.wait()
        finally:
            self._running = False

    # -- Reader ------------------------------------------------------------------------

    def serves(self, kind: Kind) -> bool:
        """True if ``kind`` has an informer that has synced."""
        informer = self._informers.get(kind)
        return informer is not None and informer.has_synced

    def _synced_informer(self, kind: Kind) -> Informer:
        informer = self._informers.get(kind)
        if informer is None:
            raise KeyError(f"the cache has no informer for {kind}; call cache.informer(kind)")
        return informer

    def get(self, kind: Kind, name: str, *, namespace: str | None = None) -> Object:
        """The cached object (read-only); ``errors.NotFound`` if absent."""
        store = self._synced_informer(kind).store
        key = f"{namespace}/{name}" if namespace and kind.namespaced else name
        obj = store.get(key)
        if obj is None:
            raise NotFound(
                f'{kind.plural} "{name}" not found in cache',
                reason="NotFound",
                status=404,
            )
        return obj

    def list(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: str | None = None,
    ) -> builtins.list[Object]:
        """Cached objects matching the filters (read-only)."""
        store = self._synced_informer(kind).store
        if namespace and kind.namespaced:
            items = store.by_index(INDEX_NAMESPACE, namespace)
        else:
            items = store.list()
        if label_selector:
            labels = LabelQuery.parse(label_selector)
            items = [o for o in items if labels.matches(o["metadata"].get("labels"))]
        if field_selector:
            fields = FieldQuery.parse(field_selector)
            items = [o for o in items if fields.matches(o)]
        return items

    def by_index(self, kind: Kind, index: str, value: str) -> builtins.list[Object]:
        """Cached objects of ``kind`` whose index ``index`` holds ``value``."""
        return self._synced_informer(kind).store.by_index(index, value)
