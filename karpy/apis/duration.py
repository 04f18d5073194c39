"""Durations as Karpenter writes them: Go duration strings ("30s", "1h30m", "720h") and,
for the fields that allow it, "Never"."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Final

__all__ = [
    "DURATION_OR_NEVER_PATTERN",
    "DURATION_PATTERN",
    "NEVER",
    "format_duration",
    "parse_duration",
    "parse_nillable_duration",
]

NEVER: Final = "Never"
#: What the CRDs accept for a duration: one or more <integer><s|m|h> groups.
DURATION_PATTERN: Final = r"^([0-9]+(s|m|h))+$"
#: The same, or "Never".
DURATION_OR_NEVER_PATTERN: Final = r"^(([0-9]+(s|m|h))+|Never)$"

_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_duration(text: str) -> timedelta:
    """Parse a Go duration string such as "90s", "1h30m" or "720h0m0s".

    Raises ValueError naming the text when it is not a duration.
    """
    body = text.strip()
    sign = 1
    if body[:1] in "+-" and body:
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    if body == "0":
        return timedelta(0)
    pos = 0
    seconds = 0.0
    for match in _PART.finditer(body):
        if match.start() != pos:
            break
        seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos == 0 or pos != len(body):
        raise ValueError(f"{text!r} is not a duration (expected e.g. 30s, 15m, 1h30m)")
    return timedelta(seconds=sign * seconds)


def parse_nillable_duration(text: str) -> timedelta | None:
    """Parse a duration that may be "Never"; "Never" gives None."""
    return None if text == NEVER else parse_duration(text)


def format_duration(value: timedelta | None) -> str:
    """Write a duration the way the CRD patterns accept it ("1h30m", "45s", "Never")."""
    if value is None:
        return NEVER
    total = round(value.total_seconds())
    if total < 0:
        raise ValueError(f"negative duration {value} has no CRD form")
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    out = "".join(f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (seconds, "s")) if n)
    return out or "0s"
