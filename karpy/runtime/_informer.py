"""The informer: keeps a local, indexed copy of one kind in step with the API server.

It lists, then watches from the list's resourceVersion with ``allowWatchBookmarks`` (so
idle watches still advance their resourceVersion and can resume cheaply). When a watch
ends it resumes from the last resourceVersion seen; when the server answers 410 Gone
("too old resource version") it lists again and reconciles the cache against the new
list — objects missing from it are delivered to handlers as deletions, changed ones as
updates. Any other failure (refused connection, reset stream, a half-open connection
caught by the inactivity watchdog) reconnects after a jittered, growing backoff.

Handlers are called synchronously, in event order, on the informer's task. A handler
added late (after the first list) first receives every cached object as an add, as
client-go does, so a controller started after leadership is won misses nothing.

A handler that raises has not taken the event in, and the API server will not send it
again until the object changes: left there, whatever the handler feeds (the cluster
model) would differ from the cache until then. So the informer keeps the failed
delivery per (handler, object) and delivers it again after a growing delay (0.5 s
doubling to 60 s, until it is taken). A later event for the same object replaces it: if
that one is taken, the handler is in step again and nothing is redelivered. Each failure
is counted through ``on_handler_error(kind, handler_method)`` (the manager counts it as
``karpy_informer_handler_errors_total``). client-go has no such path: its handlers'
panics crash the process (``HandleCrash``), which loses nothing but takes the whole
operator down for one bad object.

The watch's inactivity watchdog (``inactivity_timeout``, 120 s) is not a failure: the API
server sends bookmarks only once its watch cache has seen a change of that kind, so a
kind that has not changed since the server started (Namespaces, StorageClasses on a quiet
cluster) legitimately sends nothing for longer. The informer then opens a new watch from
the last resourceVersion, quietly (debug log, no backoff): a half-open connection is
replaced by a fresh one all the same, and a real outage shows up as a failed reconnect.
client-go's reflector likewise treats a watch that ends without error as routine and
re-watches; it finds half-open connections through HTTP/2 pings instead of a watchdog
(k8s.io/client-go v0.34 tools/cache/reflector.go, rest/transport).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._backoff import Backoff
from ._client import Selector
from ._objects import FrozenDict, Object
from ._predicates import EventHandler
from ._protocol import ListerWatcher
from ._store import INDEX_NAMESPACE, IndexFunc, Store, index_by_namespace, object_key
from .errors import Gone, WatchIdle
from .kinds import Kind

__all__ = ["HandlerRegistration", "Informer"]

log = logging.getLogger("karpy.runtime.informer")


_RETRY_INITIAL = 0.5
_RETRY_MAXIMUM = 60.0


@dataclass(slots=True)
class _Failed:
    """A delivery a handler raised on, kept to be delivered again."""

    method: str
    args: tuple[Object, ...]
    attempts: int
    timer: asyncio.TimerHandle | None = None


class HandlerRegistration:
    """Returned by :meth:`Informer.add_handler`; pass it to ``remove_handler``."""

    __slots__ = ("failed", "handler")

    def __init__(self, handler: EventHandler) -> None:
        self.handler = handler
        self.failed: dict[str, _Failed] = {}
        """Object key -> the newest delivery this handler raised on (see module docs)."""


def _strip_managed_fields(obj: Object) -> Object:
    meta = obj.get("metadata")
    if not meta or "managedFields" not in meta:
        return obj
    new_meta = FrozenDict((k, v) for k, v in meta.items() if k != "managedFields")
    return FrozenDict((k, new_meta if k == "metadata" else v) for k, v in obj.items())


def _rv(obj: Mapping[str, Any]) -> str:
    return str(obj.get("metadata", {}).get("resourceVersion") or "")


class Informer:
    """A list+watch loop for one :class:`Kind` feeding a :class:`Store` and handlers.

    ``run()`` blocks until cancelled; ``wait_for_sync()`` returns once the first list is
    in the store. ``namespace``/``label_selector``/``field_selector`` restrict what is
    watched (server-side). ``indexers`` add named indexes (a namespace index is always
    present for namespaced kinds). managedFields are dropped from cached objects unless
    ``strip_managed_fields=False``: they are large and controllers rarely read them.
    """

    def __init__(
        self,
        client: ListerWatcher,
        kind: Kind,
        *,
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        strip_managed_fields: bool = True,
        page_size: int = 500,
        watch_timeout: tuple[int, int] = (300, 600),
        inactivity_timeout: float = 120.0,
        backoff: Backoff | None = None,
        on_handler_error: Callable[[str, str], None] | None = None,
    ) -> None:
        self.client = client
        self.kind = kind
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        all_indexers = dict(indexers or {})
        if kind.namespaced:
            all_indexers.setdefault(INDEX_NAMESPACE, index_by_namespace)
        self.store = Store(all_indexers)
        self._strip = strip_managed_fields
        self._page_size = page_size
        self._watch_timeout = watch_timeout
        self._inactivity = inactivity_timeout
        self._backoff = backoff or Backoff(initial=0.8, maximum=30.0)
        self._handlers: list[HandlerRegistration] = []
        self._synced = asyncio.Event()
        self._resource_version: str | None = None
        self._rv_override: str | None = None
        self._watch_scope: asyncio.Timeout | None = None
        self._running = False
        self._on_handler_error = on_handler_error
        self.relists = 0
        """How many times the informer listed (1 after the first sync; +1 per 410 Gone)."""
        self.handler_errors = 0
        """How many deliveries a handler raised on (each retry that fails counts again)."""

    def __repr__(self) -> str:
        return f"Informer({self.kind}, namespace={self.namespace!r})"

    # -- state -------------------------------------------------------------------------

    @property
    def has_synced(self) -> bool:
        """True once the first list has been stored (stays True across relists)."""
        return self._synced.is_set()

    @property
    def resource_version(self) -> str | None:
        """The last resourceVersion seen (from a list, an event or a bookmark)."""
        return self._resource_version

    async def wait_for_sync(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Return once the first list is stored; ``TimeoutError`` after ``timeout`` s."""
        async with asyncio.timeout(timeout):
            await self._synced.wait()

    def add_indexer(self, name: str, func: IndexFunc) -> None:
        """Add a named index (built over the objects already cached)."""
        self.store.add_indexer(name, func)

    # -- handlers ----------------------------------------------------------------------

    def add_handler(self, handler: EventHandler) -> HandlerRegistration:
        """Register ``handler``; objects already cached are replayed to it as adds."""
        registration = HandlerRegistration(handler)
        self._handlers.append(registration)
        for obj in self.store.list():
            self._call(registration, "on_add", obj)
        return registration

    def remove_handler(self, registration: HandlerRegistration) -> None:
        """Stop delivering events to a handler (and drop its pending retries). Idempotent."""
        with contextlib.suppress(ValueError):
            self._handlers.remove(registration)
        for failed in registration.failed.values():
            if failed.timer is not None:
                failed.timer.cancel()
        registration.failed.clear()

    @property
    def pending_retries(self) -> int:
        """Deliveries a handler raised on that are still to be delivered again."""
        return sum(len(r.failed) for r in self._handlers)

    def _call(self, registration: HandlerRegistration, method: str, *args: Object) -> None:
        key = object_key(args[-1])
        previous = registration.failed.pop(key, None)
        if previous is not None and previous.timer is not None:
            previous.timer.cancel()  # this delivery is newer: it replaces the failed one
        try:
            getattr(registration.handler, method)(*args)
        except Exception:
            # One faulty handler must not stop the informer or starve other handlers;
            # the delivery is kept and retried so the handler does not silently diverge.
            attempts = 1 if previous is None else previous.attempts + 1
            self.handler_errors += 1
            if self._on_handler_error is not None:
                self._on_handler_error(str(self.kind), method)
            extra = {"kind": str(self.kind), "handler": method, "object": key,
                     "attempts": attempts}  # fmt: skip
            if attempts == 1:
                log.exception("event handler failed, will retry", extra=extra)
            else:
                log.debug("event handler failed again", extra=extra, exc_info=True)
            failed = _Failed(method, args, attempts)
            registration.failed[key] = failed
            self._schedule_retry(registration, key, failed)

    def _schedule_retry(self, registration: HandlerRegistration, key: str,
                        failed: _Failed) -> None:
        if not self._running:
            return  # kept; run() schedules it when the informer starts (again)
        delay = min(_RETRY_MAXIMUM, _RETRY_INITIAL * 2.0 ** (failed.attempts - 1))
        failed.timer = asyncio.get_running_loop().call_later(
            delay, self._retry, registration, key
        )

    def _retry(self, registration: HandlerRegistration, key: str) -> None:
        failed = registration.failed.get(key)
        if failed is None or registration not in self._handlers:
            return
        failed.timer = None
        # _call pops the entry and keeps the attempt count if the handler raises again.
        self._call(registration, failed.method, *failed.args)

    def _start_retries(self) -> None:
        for registration in self._handlers:
            for key, failed in registration.failed.items():
                if failed.timer is None:
                    self._schedule_retry(registration, key, failed)

    def _stop_retries(self) -> None:
        for registration in self._handlers:
            for failed in registration.failed.values():
                if failed.timer is not None:
                    failed.timer.cancel()
                    failed.timer = None

    def _emit(self, method: str, *args: Object) -> None:
        for registration in list(self._handlers):
            self._call(registration, method, *args)

    # -- testing hook ------------------------------------------------------------------

    def restart_watch(self, *, from_resource_version: str | None = None) -> None:
        """End the current watch now; the next one starts from ``from_resource_version``
        (default: the last seen). A too-old version forces the 410 → relist path."""
        self._rv_override = from_resource_version
        scope = self._watch_scope
        if scope is not None:
            scope.reschedule(asyncio.get_running_loop().time())

    # -- the loop ----------------------------------------------------------------------

    async def run(self) -> None:
        """List, then watch, forever (until cancelled). Can be run again after it ends;
        the cache is kept and the watch resumes from the last resourceVersion."""
        if self._running:
            raise RuntimeError(f"{self!r} is already running")
        self._running = True
        try:
            self._start_retries()
            await self._loop()
        finally:
            self._running = False
            self._stop_retries()

    async def _loop(self) -> None:
        while True:
            try:
                if self._rv_override is not None:
                    self._resource_version, self._rv_override = self._rv_override, None
                if self._resource_version is None:
                    await self._list_and_replace()
                    self._backoff.reset()
                await self._watch()
            except WatchIdle as exc:
                # Quiet, not broken (see the module docstring): watch again at once.
                log.debug("watch idle, watching again",
                          extra={"kind": str(self.kind), "reason": str(exc)})
            except Gone as exc:
                log.info(
                    "watch expired, relisting",
                    extra={"kind": str(self.kind), "reason": str(exc)},
                )
                self._resource_version = None
            except Exception as exc:
                delay = self._backoff.next()
                log.warning(
                    "list/watch failed, retrying",
                    extra={
                        "kind": str(self.kind),
                        "error": str(exc) or type(exc).__name__,
                        "retryAfter": round(delay, 3),
                    },
                )
                await asyncio.sleep(delay)

    async def _list_and_replace(self) -> None:
        new: dict[str, Object] = {}
        token: str | None = None
        resource_version = ""
        while True:
            page = await self.client.list_page(
                self.kind,
                namespace=self.namespace,
                label_selector=self.label_selector,
                field_selector=self.field_selector,
                limit=self._page_size,
                continue_token=token,
                frozen=True,
            )
            for obj in page.items:
                if self._strip:
                    obj = _strip_managed_fields(obj)
                new[object_key(obj)] = obj
            resource_version = page.resource_version
            token = page.continue_token
            if not token:
                break
        self._replace(new)
        self._resource_version = resource_version
        self.relists += 1
        self._synced.set()

    def _replace(self, new: dict[str, Object]) -> None:
        store = self.store
        for key in store.key_list():
            if key not in new:
                old = store.remove(key)
                if old is not None:
                    self._emit("on_delete", old)
        for obj in new.values():
            old = store.put(obj)
            if old is None:
                self._emit("on_add", obj)
            elif _rv(old) != _rv(obj):
                self._emit("on_update", old, obj)

    async def _watch(self) -> None:
        low, high = self._watch_timeout
        timeout_seconds = random.randint(low, high) if high > low else low
        received = False
        started = asyncio.get_running_loop().time()
        scope = asyncio.timeout(None)
        with contextlib.suppress(TimeoutError):
            async with scope:
                self._watch_scope = scope
                try:
                    stream = self.client.watch(
                        self.kind,
                        namespace=self.namespace,
                        resource_version=self._resource_version,
                        label_selector=self.label_selector,
                        field_selector=self.field_selector,
                        timeout_seconds=timeout_seconds,
                        allow_bookmarks=True,
                        inactivity_timeout=self._inactivity,
                    )
                    async with contextlib.aclosing(stream) as events:
                        async for event in events:
                            if not received:
                                received = True
                                self._backoff.reset()
                            self._apply(event.type, event.object)
                finally:
                    self._watch_scope = None
        quick = asyncio.get_running_loop().time() - started < 1.0
        if not received and quick and not scope.expired():
            # A watch that closes at once, empty, again and again must not spin the CPU.
            await asyncio.sleep(self._backoff.next())

    def _apply(self, etype: str, obj: Object) -> None:
        rv = _rv(obj)
        if etype == "BOOKMARK":
            if rv:
                self._resource_version = rv
            return
        if self._strip:
            obj = _strip_managed_fields(obj)
        if etype == "DELETED":
            old = self.store.remove(object_key(obj))
            self._emit("on_delete", obj)
        else:
            old = self.store.put(obj)
            if old is None:
                self._emit("on_add", obj)
            else:
                self._emit("on_update", old, obj)
        if rv:
            self._resource_version = rv
