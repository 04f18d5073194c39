"""Events the controllers would have recorded, kept in memory instead of written.

The provisioner and disruption explain their decisions through Events
(FailedScheduling, Nominated, DisruptionBlocked, Unconsolidatable, ...). A tool runs
their deciding code with a :class:`CapturingRecorder`, so it can show the same reasons
without writing a single Event.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpy.runtime import Client, Clock, EventRecorder

__all__ = ["CapturedEvent", "CapturingRecorder"]


@dataclass(frozen=True, slots=True)
class CapturedEvent:
    """One Event a controller recorded: about which object, its type, reason, message."""

    kind: str
    namespace: str
    name: str
    type: str
    reason: str
    message: str


class CapturingRecorder(EventRecorder):
    """An :class:`EventRecorder` that keeps events in :attr:`events` (never writes)."""

    def __init__(self, client: Client, *, component: str = "karpenter",
                 clock: Clock | None = None) -> None:
        super().__init__(client, component=component, clock=clock)
        self.events: list[CapturedEvent] = []
        """Every event recorded, in order (repeats included)."""

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Keep the event."""
        meta = obj.get("metadata") or {}
        self.events.append(CapturedEvent(
            kind=str(obj.get("kind", "")), namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name", "")), type=type_, reason=reason, message=message,
        ))

    def about(self, kind: str, name: str, namespace: str = "") -> list[CapturedEvent]:
        """The events recorded about one object."""
        return [e for e in self.events
                if e.kind == kind and e.name == name and e.namespace == namespace]

    async def run(self) -> None:
        """Nothing to write."""

    async def flush(self) -> None:
        """Nothing to write."""
