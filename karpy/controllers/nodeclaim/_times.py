"""Timestamps as the API server writes them (RFC 3339, whole seconds, UTC)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

__all__ = ["parse_time", "rfc3339"]


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp of an object (``...Z``) as an aware datetime; None if unset.

    Raises ValueError for text that is not a timestamp.
    """
    if not value:
        return None
    parsed = datetime.fromisoformat(str(value))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def rfc3339(when: datetime) -> str:
    """``when`` as the API server stores a ``metav1.Time``: UTC, to the second."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
