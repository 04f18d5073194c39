"""Log values formatted the way Karpenter's logs show them.

Karpenter's zap logger writes durations with Go's ``time.Duration.String`` and shortens
long lists to "a, b, c, d, e and N other(s)"; users grep for those shapes.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["go_duration", "truncated_list"]


def truncated_list(items: Sequence[str], max_items: int = 5) -> str:
    """The first ``max_items`` joined by ", ", then " and N other(s)" for the rest."""
    shown = ", ".join(items[:max_items])
    rest = len(items) - max_items
    return f"{shown} and {rest} other(s)" if rest > 0 else shown


def _trim(value: float, digits: int) -> str:
    text = f"{value:.{digits}f}".rstrip("0").rstrip(".")
    return text or "0"


def go_duration(seconds: float) -> str:
    """``seconds`` as Go prints a ``time.Duration`` ("1.5s", "2m3.25s", "850.1ms")."""
    nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    if nanos < 1_000:
        return f"{sign}{nanos}ns"
    if nanos < 1_000_000:
        return f"{sign}{_trim(nanos / 1e3, 3)}µs"
    if nanos < 1_000_000_000:
        return f"{sign}{_trim(nanos / 1e6, 6)}ms"
    hours, rem = divmod(nanos, 3_600 * 10**9)
    minutes, rem = divmod(rem, 60 * 10**9)
    secs = _trim(rem / 1e9, 9) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}"
    if minutes:
        return f"{sign}{minutes}m{secs}"
    return f"{sign}{secs}"
