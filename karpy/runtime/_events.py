"""Kubernetes Events: record what a controller did to an object, for ``kubectl describe``.

:class:`EventRecorder` writes core/v1 Events as Karpenter's recorder over client-go's:

* **de-duplication by key, before anything is queued** (Karpenter's pkg/events, checked
  against sigs.k8s.io/karpenter v1.14.1): an event recorded with ``dedupe_values`` is
  dropped while another with the same reason and the same values was recorded less
  than ``dedupe_timeout`` ago (2 minutes by default) — the message does not count, so a
  "Failed to drain node, ..." whose text changes per pod is one event per node per window;
* a **per-object token bucket** (burst 25, one more every 5 minutes: client-go's
  spam filter), also applied before queueing, so an object's storm takes no queue room;
* an event identical to one still **waiting in the queue** (same object, type, reason,
  message) joins it and is written once with its count (client-go's aggregation);
* the same event recorded again after it was written bumps ``count`` and
  ``lastTimestamp`` of the existing Event with a merge patch instead of creating a new
  one (remembered for the last 4096 distinct events);
* ``event()`` never blocks or raises: events go through a bounded queue drained by
  ``run()`` (the manager runs it). What is not written — over the object's budget, the
  queue full, the write refused — is counted through ``on_drop(component, cause)``
  (the manager's ``karpy_events_dropped_total``), and a full queue is logged at most once
  a minute with the number dropped since, never once per event. ``publish()`` writes one
  at once for callers that want to await it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._client import PatchType
from ._clock import Clock, SystemClock
from ._protocol import Client
from ._timestamps import format_time
from .errors import ClientError, NotFound
from .kinds import EVENT

__all__ = ["DEDUPE_TIMEOUT", "NORMAL", "WARNING", "EventRecorder"]

log = logging.getLogger("karpy.runtime.events")

NORMAL = "Normal"
WARNING = "Warning"

DEDUPE_TIMEOUT = 120.0
"""Karpenter's default dedupe timeout (``defaultDedupeTimeout``), in seconds."""

_DEDUP_SIZE = 4096
_DEDUPE_KEYS_MAX = 65536
_SPAM_BURST = 25.0
_SPAM_REFILL_PER_S = 1.0 / 300.0
_DROP_LOG_EVERY_S = 60.0


@dataclass(slots=True)
class _Pending:
    involved: Mapping[str, Any]
    type: str
    reason: str
    message: str
    repeats: int = 1


class EventRecorder:
    """Writes Events about objects, de-duplicated and rate-limited (see module docs)."""

    needs_leader_election = False

    def __init__(
        self,
        client: Client,
        *,
        component: str,
        host: str | None = None,
        clock: Clock | None = None,
        queue_size: int = 1000,
        on_drop: Callable[[str, str], None] | None = None,
    ) -> None:
        self._client = client
        self.component = component
        self.host = host or socket.gethostname()
        self._clock = clock or SystemClock()
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue(maxsize=queue_size)
        self._seen: OrderedDict[tuple[str, ...], tuple[str, str, int]] = OrderedDict()
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._waiting: dict[tuple[str, ...], _Pending] = {}
        self._dedupe: OrderedDict[tuple[str, ...], float] = OrderedDict()
        self._on_drop = on_drop
        self._drops_unlogged = 0
        self._drop_logged_at: float | None = None
        self._seq = 0
        self.dropped = 0
        """Events not written: over the object's budget, the queue full, or refused."""
        self.deduplicated = 0
        """Events dropped by their dedupe key (as Karpenter does: not a loss)."""

    # -- recording -----------------------------------------------------------------------

    def normal(self, obj: Mapping[str, Any], reason: str, message: str, *,
               dedupe_values: Sequence[str] = (),
               dedupe_timeout: float = DEDUPE_TIMEOUT) -> None:
        """Record a Normal event about ``obj`` (see :meth:`event`)."""
        self.event(obj, NORMAL, reason, message,
                   dedupe_values=dedupe_values, dedupe_timeout=dedupe_timeout)

    def warning(self, obj: Mapping[str, Any], reason: str, message: str, *,
                dedupe_values: Sequence[str] = (),
                dedupe_timeout: float = DEDUPE_TIMEOUT) -> None:
        """Record a Warning event about ``obj`` (see :meth:`event`)."""
        self.event(obj, WARNING, reason, message,
                   dedupe_values=dedupe_values, dedupe_timeout=dedupe_timeout)

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str, *,
              dedupe_values: Sequence[str] = (),
              dedupe_timeout: float = DEDUPE_TIMEOUT) -> None:
        """Queue an event about ``obj``; never blocks.

        With ``dedupe_values`` (Karpenter's ``DedupeValues``) it is dropped while an event
        of the same reason and values was recorded less than ``dedupe_timeout`` s ago."""
        if dedupe_values and not self._first_in_window(reason, dedupe_values, dedupe_timeout):
            self.deduplicated += 1
            return
        identity = _identity(obj)
        if not self._allow(identity):
            self._drop("rate_limited", reason, obj)
            return
        key = (identity, str(obj.get("kind", "")), type_, reason, message)
        waiting = self._waiting.get(key)
        if waiting is not None:
            waiting.repeats += 1  # written once, with the count
            return
        pending = _Pending(obj, type_, reason, message)
        try:
            self._queue.put_nowait(pending)
        except asyncio.QueueFull:
            self._drop("queue_full", reason, obj)
            return
        self._waiting[key] = pending

    def _first_in_window(self, reason: str, values: Sequence[str], timeout: float) -> bool:
        key = (reason.lower(), *values)
        now = self._clock.monotonic()
        until = self._dedupe.get(key)
        if until is not None and now < until:
            return False
        self._dedupe.pop(key, None)
        self._dedupe[key] = now + timeout
        # Windows end in roughly insertion order: forget the ended ones from the front,
        # and the oldest ones beyond the bound (a bigger bound than distinct keys need).
        while self._dedupe:
            first_key, first_until = next(iter(self._dedupe.items()))
            if first_until > now and len(self._dedupe) <= _DEDUPE_KEYS_MAX:
                break
            del self._dedupe[first_key]
        return True

    def _drop(self, cause: str, reason: str, obj: Mapping[str, Any]) -> None:
        self.dropped += 1
        if self._on_drop is not None:
            self._on_drop(self.component, cause)
        if cause != "queue_full":
            return  # an object over its budget is the filter working, as client-go's
        self._drops_unlogged += 1
        now = self._clock.monotonic()
        if self._drop_logged_at is None or now - self._drop_logged_at >= _DROP_LOG_EVERY_S:
            log.warning(
                "event queue full, dropping event",
                extra={"reason": reason, "object": _ref_name(obj),
                       "dropped": self._drops_unlogged},
            )  # fmt: skip
            self._drop_logged_at = now
            self._drops_unlogged = 0

    async def run(self) -> None:
        """Write queued events until cancelled."""
        while True:
            pending = await self._take()
            try:
                await self._write(pending)
            except ClientError as exc:
                self._drop("write_failed", pending.reason, pending.involved)
                log.warning(
                    "failed to write event",
                    extra={
                        "reason": pending.reason,
                        "object": _ref_name(pending.involved),
                        "error": str(exc),
                    },
                )

    async def flush(self) -> None:
        """Write every queued event now (for tests and shutdown paths)."""
        while not self._queue.empty():
            await self._write(self._take_nowait())

    async def _take(self) -> _Pending:
        pending = await self._queue.get()
        self._forget_waiting(pending)
        return pending

    def _take_nowait(self) -> _Pending:
        pending = self._queue.get_nowait()
        self._forget_waiting(pending)
        return pending

    def _forget_waiting(self, pending: _Pending) -> None:
        # Once taken, repeats queue anew (this one's count is fixed as it is written).
        key = (_identity(pending.involved), str(pending.involved.get("kind", "")),
               pending.type, pending.reason, pending.message)  # fmt: skip
        if self._waiting.get(key) is pending:
            del self._waiting[key]

    # -- writing -------------------------------------------------------------------------

    def _allow(self, uid: str) -> bool:
        now = self._clock.monotonic()
        tokens, last = self._buckets.pop(uid, (_SPAM_BURST, now))
        tokens = min(_SPAM_BURST, tokens + (now - last) * _SPAM_REFILL_PER_S)
        allowed = tokens >= 1.0
        self._buckets[uid] = (tokens - 1.0 if allowed else tokens, now)
        while len(self._buckets) > _DEDUP_SIZE:
            self._buckets.popitem(last=False)
        return allowed

    async def publish(
        self, obj: Mapping[str, Any], type_: str, reason: str, message: str
    ) -> Mapping[str, Any] | None:
        """Write (or bump the count of) one event now; returns the Event, or None if the
        object is over its event rate limit."""
        if not self._allow(_identity(obj)):
            self._drop("rate_limited", reason, obj)
            return None
        return await self._write(_Pending(obj, type_, reason, message))

    async def _write(self, pending: _Pending) -> Mapping[str, Any]:
        obj, type_, reason, message = (
            pending.involved, pending.type, pending.reason, pending.message
        )
        repeats = pending.repeats
        meta = obj.get("metadata") or {}
        involved = {
            "apiVersion": obj.get("apiVersion", ""),
            "kind": obj.get("kind", ""),
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        }
        identity = _identity(obj)
        namespace = involved["namespace"] or "default"
        now = format_time(self._clock.now())
        key = (identity, involved["kind"], type_, reason, message)
        seen = self._seen.get(key)
        if seen is not None:
            name, ns, count = seen
            try:
                event = await self._client.patch(
                    EVENT,
                    name,
                    {"count": count + repeats, "lastTimestamp": now},
                    namespace=ns,
                    patch_type=PatchType.MERGE,
                )
            except NotFound:
                pass  # expired server-side (events have a TTL): create a fresh one
            else:
                self._remember(key, name, ns, count + repeats)
                return event
        # client-go names events <object>.<unix nanos in hex>; the counter keeps two
        # events recorded in the same nanosecond (or under a fake clock) apart.
        self._seq += 1
        name = f"{involved['name']}.{time.time_ns() + self._seq:x}"
        body = {
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {k: v for k, v in involved.items() if v},
            "reason": reason,
            "message": message,
            "type": type_,
            "source": {"component": self.component, "host": self.host},
            "reportingComponent": self.component,
            "reportingInstance": self.host,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": repeats,
        }
        event = await self._client.create(EVENT, body)
        self._remember(key, name, namespace, repeats)
        return event

    def _remember(self, key: tuple[str, ...], name: str, namespace: str, count: int) -> None:
        self._seen.pop(key, None)
        self._seen[key] = (name, namespace, count)
        while len(self._seen) > _DEDUP_SIZE:
            self._seen.popitem(last=False)


def _identity(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return str(meta.get("uid") or "") or _ref_name(obj)


def _ref_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    kind = obj.get("kind", "")
    return f"{kind}/{ns}/{meta.get('name')}" if ns else f"{kind}/{meta.get('name')}"
