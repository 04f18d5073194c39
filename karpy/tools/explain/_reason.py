"""One reason, as ``karpy explain`` reports it: a stable code for scripts, a sentence
for people, and the facts behind it (the key, the taint, the resource ...)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Reason"]


@dataclass(frozen=True, slots=True)
class Reason:
    """Why something cannot happen.

    ``code`` is stable (docs/tools.md lists them); ``message`` reads as a sentence;
    ``details`` holds the named facts (JSON-ready values only).
    """

    code: str
    message: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The ``-o json`` form."""
        return {"code": self.code, "message": self.message, "details": dict(self.details)}
