"""Kubernetes Events: record what a controller did to an object, for ``kubectl describe``.

:class:`EventRecorder` writes core/v1 Events as client-go's recorder does:

* the same (object, type, reason, message) recorded again bumps ``count`` and
  ``lastTimestamp`` of the existing Event with a merge patch instead of creating a new
  one (de-duplication, remembered for the last 4096 distinct events);
* a per-object token bucket (burst 25, one more every 5 minutes) drops event storms;
* ``event()`` never blocks or raises: events go through a bounded queue drained by
  ``run()`` (the manager runs it); when the queue is full the event is dropped and
  logged. ``publish()`` writes one at once for callers that want to await it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._client import PatchType
from ._clock import Clock, SystemClock
from ._protocol import Client
from ._timestamps import format_time
from .errors import ClientError, NotFound
from .kinds import EVENT

__all__ = ["NORMAL", "WARNING", "EventRecorder"]

log = logging.getLogger("karpy.runtime.events")

NORMAL = "Normal"
WARNING = "Warning"

_DEDUP_SIZE = 4096
_SPAM_BURST = 25.0
_SPAM_REFILL_PER_S = 1.0 / 300.0


@dataclass(frozen=True, slots=True)
class _Pending:
    involved: Mapping[str, Any]
    type: str
    reason: str
    message: str


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
    ) -> None:
        self._client = client
        self.component = component
        self.host = host or socket.gethostname()
        self._clock = clock or SystemClock()
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue(maxsize=queue_size)
        self._seen: OrderedDict[tuple[str, ...], tuple[str, str, int]] = OrderedDict()
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._seq = 0
        self.dropped = 0
        """Events dropped because the queue was full or the object was spamming."""

    # -- recording -----------------------------------------------------------------------

    def normal(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        """Record a Normal event about ``obj``."""
        self.event(obj, NORMAL, reason, message)

    def warning(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        """Record a Warning event about ``obj``."""
        self.event(obj, WARNING, reason, message)

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Queue an event about ``obj`` (never blocks; dropped if the queue is full)."""
        try:
            self._queue.put_nowait(_Pending(obj, type_, reason, message))
        except asyncio.QueueFull:
            self.dropped += 1
            log.warning(
                "event queue full, dropping event",
                extra={"reason": reason, "object": _ref_name(obj)},
            )

    async def run(self) -> None:
        """Write queued events until cancelled."""
        while True:
            pending = await self._queue.get()
            try:
                await self.publish(pending.involved, pending.type, pending.reason, pending.message)
            except ClientError as exc:
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
            pending = self._queue.get_nowait()
            await self.publish(pending.involved, pending.type, pending.reason, pending.message)

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
        meta = obj.get("metadata") or {}
        involved = {
            "apiVersion": obj.get("apiVersion", ""),
            "kind": obj.get("kind", ""),
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        }
        identity = involved["uid"] or _ref_name(obj)
        if not self._allow(identity):
            self.dropped += 1
            return None
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
                    {"count": count + 1, "lastTimestamp": now},
                    namespace=ns,
                    patch_type=PatchType.MERGE,
                )
            except NotFound:
                pass  # expired server-side (events have a TTL): create a fresh one
            else:
                self._remember(key, name, ns, count + 1)
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
            "count": 1,
        }
        event = await self._client.create(EVENT, body)
        self._remember(key, name, namespace, 1)
        return event

    def _remember(self, key: tuple[str, ...], name: str, namespace: str, count: int) -> None:
        self._seen.pop(key, None)
        self._seen[key] = (name, namespace, count)
        while len(self._seen) > _DEDUP_SIZE:
            self._seen.popitem(last=False)


def _ref_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    kind = obj.get("kind", "")
    return f"{kind}/{ns}/{meta.get('name')}" if ns else f"{kind}/{meta.get('name')}"
