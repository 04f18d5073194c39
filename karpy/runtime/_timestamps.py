"""Timestamps as the API server writes them: the one place karpy reads and writes them.

A ``metav1.Time`` (creationTimestamp, deletionTimestamp, a condition's
lastTransitionTime) is RFC 3339 in UTC to the second, ``2024-01-01T10:00:00Z``; a
``metav1.MicroTime`` (a Lease's renewTime, an Event's eventTime) carries microseconds,
``2024-01-01T10:00:00.000000Z``. Reading is lenient the way the API server's is not:
fractional seconds and offsets are accepted, and a time without an offset is taken as
UTC, so whatever a fake, a snapshot or an older writer left comes back comparable with
the clock's aware ``now``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

__all__ = ["format_micro_time", "format_time", "parse_time"]


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp (``...Z``) as an aware datetime; None when unset (empty).

    Raises ValueError for text that is not a timestamp.
    """
    if not value:
        return None
    parsed = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _utc(when: datetime) -> datetime:
    # A naive datetime is already UTC here (see parse_time), not local time.
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def format_time(when: datetime) -> str:
    """``when`` as the API server stores a ``metav1.Time``: UTC, to the second."""
    return _utc(when).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(when: datetime) -> str:
    """``when`` as the API server stores a ``metav1.MicroTime``: UTC, to the microsecond."""
    return _utc(when).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
