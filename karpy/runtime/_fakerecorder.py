"""FakeEventRecorder: an :class:`EventRecorder` that keeps the Events it is given, for
unit tests (client-go's ``record.FakeRecorder``) and for tools that show what a
controller would have said without writing to a cluster.

It is a real ``EventRecorder`` (a controller typed against one accepts it without a
cast) whose :meth:`~FakeEventRecorder.event` keeps a :class:`RecordedEvent` instead of
queueing a write. What it does **not** do: write Events anywhere, drop events by their
dedupe key, de-duplicate repeats into a count or drop an object's spam (the real
recorder does all three), so :attr:`~FakeEventRecorder.events` holds every call, in
order, with the dedupe values it was given (so a test can check them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._clock import Clock
from ._events import DEDUPE_TIMEOUT, EventRecorder
from ._fakeclient import FakeClient

__all__ = ["FakeEventRecorder", "RecordedEvent"]


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    """One Event a controller recorded: about which object, its type, reason, message."""

    kind: str
    namespace: str
    name: str
    type: str
    reason: str
    message: str
    dedupe_values: tuple[str, ...] = ()


class FakeEventRecorder(EventRecorder):
    """Keeps every Event in :attr:`events` and writes none (see the module docstring)."""

    def __init__(self, *, component: str = "karpenter", clock: Clock | None = None) -> None:
        super().__init__(FakeClient(clock=clock), component=component, host="fake", clock=clock)
        self.events: list[RecordedEvent] = []
        """Every event recorded, in order (repeats included)."""

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str, *,
              dedupe_values: Sequence[str] = (),
              dedupe_timeout: float = DEDUPE_TIMEOUT) -> None:
        """Keep the event."""
        meta = obj.get("metadata") or {}
        self.events.append(RecordedEvent(
            kind=str(obj.get("kind", "")), namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name", "")), type=type_, reason=reason, message=message,
            dedupe_values=tuple(dedupe_values),
        ))  # fmt: skip

    def reasons(self, name: str | None = None) -> list[str]:
        """The reasons recorded (about objects named ``name`` only, if given), in order."""
        return [e.reason for e in self.events if name is None or e.name == name]

    def with_reason(self, reason: str) -> list[RecordedEvent]:
        """The events recorded with ``reason``, in order."""
        return [e for e in self.events if e.reason == reason]

    def about(self, kind: str, name: str, namespace: str = "") -> list[RecordedEvent]:
        """The events recorded about one object."""
        return [e for e in self.events
                if e.kind == kind and e.name == name and e.namespace == namespace]

    async def run(self) -> None:
        """Nothing to write."""

    async def flush(self) -> None:
        """Nothing to write."""
