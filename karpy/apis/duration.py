"""Durations as Karpenter writes them: Go duration strings ("30s", "1h30m", "720h") and,
for the fields that allow it, "Never".

This is the one place karpy reads and writes Go duration text. Parsing follows Go's
``time.ParseDuration`` step for step, in integer nanoseconds, including its limit: a
``time.Duration`` is an int64 of nanoseconds, so nothing beyond 2562047h47m16.854775807s
parses — Go says "invalid duration", karpy raises :class:`ValueError` naming the text.
Holding to that limit matters beyond fidelity: a larger value (``"99999999h"`` passes the
CRD patterns) would overflow ``datetime`` arithmetic further on, far from the field that
caused it. No number grows past int64 before it is refused, and text longer than
:data:`MAX_DURATION_LENGTH` is refused before it is read (Go has no such limit, but
every duration Go prints fits in 25 characters, and a megabyte of ``1h1h...`` would
otherwise cost the event loop a third of a second per parse).
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Final

__all__ = [
    "DURATION_OR_NEVER_PATTERN",
    "DURATION_PATTERN",
    "MAX_DURATION",
    "MAX_DURATION_LENGTH",
    "NEVER",
    "format_duration",
    "format_go_duration",
    "go_duration_nanoseconds",
    "parse_duration",
    "parse_nillable_duration",
]

NEVER: Final = "Never"
#: What the CRDs accept for a duration: one or more <integer><s|m|h> groups.
DURATION_PATTERN: Final = r"^([0-9]+(s|m|h))+$"
#: The same, or "Never".
DURATION_OR_NEVER_PATTERN: Final = r"^(([0-9]+(s|m|h))+|Never)$"

_MAX_NANOS: Final = (1 << 63) - 1
#: The longest duration Go can hold (``math.MaxInt64`` nanoseconds, 2562047h47m16.854775807s).
MAX_DURATION: Final = timedelta(microseconds=_MAX_NANOS // 1000)

#: The longest duration text karpy reads.
MAX_DURATION_LENGTH: Final = 128

_UNITS: Final = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek small letter mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
# One "<number><unit>" group of Go's grammar [-+]?([0-9]*(\.[0-9]*)?[a-z]+)+ ; the unit is
# everything up to the next digit or dot, as in Go (so "1 s" has the unknown unit " s").
_TOO_LARGE: Final = "too large"
_GROUP: Final = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")


def _invalid(text: str, why: str) -> ValueError:
    if why == _TOO_LARGE:
        return ValueError(f"{text!r} is too long a duration: Go durations end at 2562047h "
                          "(about 292 years)")
    return ValueError(f"{text!r} is not a duration (expected e.g. 30s, 15m, 1h30m)")


def _fraction(digits: str) -> tuple[int, float]:
    # Go's leadingFraction: digits accumulate until the next one would overflow int64;
    # later digits are ignored. The scale is a float multiplied by 10 per kept digit, as
    # in Go (it reaches +Inf after ~309 digits, and a leading zero run only grows it).
    zeros = len(digits) - len(digits.lstrip("0"))
    value = 0
    kept = zeros
    for char in digits[zeros:]:
        if value > _MAX_NANOS // 10:
            break
        following = value * 10 + ord(char) - 48
        if following > 1 << 63:
            break
        value = following
        kept += 1
    scale = 1.0
    for _ in range(min(kept, 400)):
        scale *= 10.0
    return value, scale


def go_duration_nanoseconds(text: str) -> int:
    """``time.ParseDuration(text)`` in nanoseconds, the way Go computes it.

    Raises ValueError naming the text when Go would reject it, including a duration
    beyond int64 nanoseconds (about 2562047h).
    """
    if len(text) > MAX_DURATION_LENGTH:
        raise ValueError(f"{text[:32] + '...'!r} is not a duration: longer than "
                         f"{MAX_DURATION_LENGTH} characters")
    body = text
    negative = False
    if body[:1] in ("-", "+") and body:
        negative = body[0] == "-"
        body = body[1:]
    if body == "0":
        return 0
    if not body:
        raise _invalid(text, "empty")
    total = 0
    pos = 0
    while pos < len(body):
        match = _GROUP.match(body, pos)
        assert match is not None  # every part of the pattern may be empty
        whole, frac, unit = match.groups()
        if not whole and not frac:
            raise _invalid(text, "a number is missing")
        if not unit:
            raise _invalid(text, "a unit is missing")
        scale = _UNITS.get(unit)
        if scale is None:
            raise _invalid(text, f"unknown unit {unit!r}")
        significant = whole.lstrip("0")
        # Go refuses a number above 2**63 (19 digits at most) or one that overflows
        # once multiplied by its unit, before doing the multiplication.
        if len(significant) > 19 or int(significant or "0") > (1 << 63) // scale:
            raise _invalid(text, _TOO_LARGE)
        part = int(significant or "0") * scale
        if frac:
            value, divisor = _fraction(frac)
            if value > 0:
                part += int(float(value) * (float(scale) / divisor))
                if part > 1 << 63:
                    raise _invalid(text, _TOO_LARGE)
        total += part
        if total > 1 << 63:
            raise _invalid(text, _TOO_LARGE)
        pos = match.end()
    if negative:
        return -total
    if total > _MAX_NANOS:
        raise _invalid(text, _TOO_LARGE)
    return total


def parse_duration(text: str) -> timedelta:
    """Parse a Go duration string such as "90s", "1h30m" or "720h0m0s" (to the microsecond).

    Raises ValueError naming the text when it is not a duration Go accepts.
    """
    # No strip: time.ParseDuration refuses " 5m" and "5m\n" alike.
    nanos = go_duration_nanoseconds(text)
    # Truncate toward zero, as Go's Duration.Microseconds does.
    micros = abs(nanos) // 1000
    return timedelta(microseconds=-micros if nanos < 0 else micros)


def parse_nillable_duration(text: str) -> timedelta | None:
    """Parse a duration that may be "Never"; "Never" gives None."""
    return None if text == NEVER else parse_duration(text)


def _decimal(value: int, digits: int) -> str:
    # value / 10**digits with trailing zeros (and a bare point) dropped, as Go's fmtFrac.
    whole, frac = divmod(value, 10**digits)
    text = f"{frac:0{digits}d}".rstrip("0")
    return f"{whole}.{text}" if text else str(whole)


def format_go_duration(seconds: float | timedelta) -> str:
    """A duration as Go's ``Duration.String`` prints it ("1.5s", "2m3.25s", "850.1ms",
    "15m0s", "1h0m0s"), as Karpenter's log lines show durations."""
    if isinstance(seconds, timedelta):
        nanos = (seconds // timedelta(microseconds=1)) * 1000
    else:
        nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    if nanos < 1_000:
        return f"{sign}{nanos}ns"
    if nanos < 1_000_000:
        return f"{sign}{_decimal(nanos, 3)}\u00b5s"
    if nanos < 1_000_000_000:
        return f"{sign}{_decimal(nanos, 6)}ms"
    hours, rest = divmod(nanos, 3_600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    secs = _decimal(rest, 9) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}"
    if minutes:
        return f"{sign}{minutes}m{secs}"
    return f"{sign}{secs}"


# A group whose number is zero ("0m" in "1h0m5s"), not the end of a longer number ("10m").
_ZERO_GROUP: Final = re.compile(r"(?<![0-9])0[hms]")


def format_duration(value: timedelta | None) -> str:
    """Write a duration the way the CRD patterns accept it ("1h30m", "45s", "Never").

    Go's ``Duration.String`` of the whole seconds (:func:`format_go_duration`,
    "1h30m0s") with its zero groups left out, as people write durations in manifests;
    Go reads either text back as the same duration.
    """
    if value is None:
        return NEVER
    total = round(value.total_seconds())
    if total < 0:
        raise ValueError(f"negative duration {value} has no CRD form")
    return _ZERO_GROUP.sub("", format_go_duration(timedelta(seconds=total))) or "0s"
