"""An event recorder for termination's unit tests: keeps the events it is given."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass
class Event:
    """One event a controller recorded."""

    type: str
    reason: str
    message: str
    kind: str
    name: str


class FakeRecorder:
    """Records events instead of writing them (``karpy.runtime.EventRecorder``'s API)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self.events.append(Event(type_, reason, message, str(obj.get("kind", "")),
                                 str((obj.get("metadata") or {}).get("name", ""))))

    def normal(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        self.event(obj, "Normal", reason, message)

    def warning(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        self.event(obj, "Warning", reason, message)

    def reasons(self, name: str | None = None) -> list[str]:
        """The reasons recorded (about object ``name`` only, if given), in order."""
        return [e.reason for e in self.events if name is None or e.name == name]
