"""Budget schedules read exactly as Karpenter reads them: robfig/cron v3's standard parser.

Karpenter (sigs.k8s.io/karpenter v1.14.1 and v1.15.0, ``Budget.IsActive`` in
pkg/apis/v1/nodepool.go) parses ``cron.ParseStandard("TZ=UTC " + schedule)`` with
github.com/robfig/cron/v3 v3.0.1: five fields (minute, hour, day of month, month, day of
week) or a descriptor (``@yearly`` ... ``@hourly``, ``@every <duration>``), always in UTC.
Written by hand because no PyPI library parses the same language: croniter takes six
and seven fields, ``L``/``W``/``#``, ``7`` for Sunday, ``@reboot``-like extras and
``H`` hashing, and reads some fields differently; any of those accepted here would be
a schedule Karpenter refuses (and so blocks disruption for) while karpy allows it.

What robfig/cron does, and so what this module does:

- Fields are split on Go's ``unicode.IsSpace`` (``strings.Fields``), after the spec is
  trimmed the same way; the ``TZ=UTC`` prefix Karpenter adds means a schedule of its own
  ``TZ=...`` or ``CRON_TZ=...`` is a sixth field and refused.
- A field is ``,``-separated ranges (empty parts skipped: ``1,,2`` is ``1,2`` and ``,``
  matches nothing); a range is ``*`` or ``?``, ``N`` or ``N-M``, optionally ``/STEP``;
  ``N/STEP`` runs to the field's maximum; ``*-anything`` is ``*``. Numbers are
  ``strconv.Atoi`` (ASCII digits, an optional sign, leading zeros, ``-0`` allowed,
  negatives refused); months ``jan``-``dec`` and days ``sun``-``sat`` in any case (Go's
  ``strings.ToLower``). Bounds: minute 0-59, hour 0-23, day 1-31, month 1-12, weekday
  0-6 (``7`` is refused).
- Day of month and day of week combine with AND when either field starts with ``*`` or
  ``?`` (a ``*/1``-like range keeps the star, ``*/2`` drops it), else with OR.
- The next activation is searched at most five years ahead; a schedule that never
  fires (``0 0 30 2 *``) has no next activation, which Karpenter's ``IsActive`` reads
  as the zero time, *before now*: such a budget is always active there, and here.

scripts/cron_parity/ holds a Go program that prints robfig/cron's verdict and next
activations for a corpus; tests/apis/test_cron.py compares this module with its output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from karpy.apis.duration import go_duration_nanoseconds
from karpy.apis.strconv import parse_go_int

__all__ = ["CronError", "CronSchedule", "parse_cron"]


class CronError(ValueError):
    """A schedule robfig/cron's standard parser refuses; the message says why."""


# Go's unicode.IsSpace: the Latin-1 spaces plus the White_Space property. (Python's
# str.split() also splits on U+001C-U+001F, which Go does not.)
_GO_SPACE: Final = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_FIELDS: Final = re.compile(f"[^{re.escape(_GO_SPACE)}]+")
_STAR: Final = 1 << 63


@dataclass(frozen=True)
class _Bounds:
    low: int
    high: int
    names: dict[str, int] | None = None


_MINUTES: Final = _Bounds(0, 59)
_HOURS: Final = _Bounds(0, 23)
_DOM: Final = _Bounds(1, 31)
_MONTHS: Final = _Bounds(1, 12, {m: i + 1 for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])})
_DOW: Final = _Bounds(0, 6, {d: i for i, d in enumerate(
    ["sun", "mon", "tue", "wed", "thu", "fri", "sat"])})

_MAX_SPEC: Final = 1024  # a schedule is a few dozen characters; bound the work


def _bits(low: int, high: int, step: int) -> int:
    return sum(1 << i for i in range(low, high + 1, step))


def _all(bounds: _Bounds) -> int:
    return _bits(bounds.low, bounds.high, 1) | _STAR


def _next_month(t: datetime) -> datetime:
    # time.AddDate(0, 1, 0), normalised as Go does (Jan 31 + 1 month is Mar 3), though
    # Next only ever calls it on the 1st of a month.
    year, month = (t.year + 1, 1) if t.month == 12 else (t.year, t.month + 1)
    return t.replace(year=year, month=month, day=1) + timedelta(days=t.day - 1)


def _go_lower(text: str) -> str:
    # strings.ToLower maps rune by rune; Python's lower() turns U+0130 into two runes.
    return "".join("i" if c == "\u0130" else c.lower() for c in text)


def _number(text: str) -> int:
    try:
        value = parse_go_int(text)
    except ValueError:
        raise CronError(f"failed to parse int from {text!r}") from None
    if value < 0:
        raise CronError(f"negative number ({value}) not allowed: {text!r}")
    return value


def _int_or_name(text: str, bounds: _Bounds) -> int:
    if bounds.names is not None:
        named = bounds.names.get(_go_lower(text))
        if named is not None:
            return named
    return _number(text)


def _range(expr: str, bounds: _Bounds) -> int:
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    extra = 0
    if low_and_high[0] in ("*", "?"):
        start, end, extra = bounds.low, bounds.high, _STAR
    else:
        start = _int_or_name(low_and_high[0], bounds)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _int_or_name(low_and_high[1], bounds)
        else:
            raise CronError(f"too many hyphens: {expr!r}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _number(range_and_step[1])
        if len(low_and_high) == 1:
            end = bounds.high
        if step > 1:
            extra = 0
    else:
        raise CronError(f"too many slashes: {expr!r}")
    if start < bounds.low:
        raise CronError(f"beginning of range ({start}) below minimum ({bounds.low}): {expr!r}")
    if end > bounds.high:
        raise CronError(f"end of range ({end}) above maximum ({bounds.high}): {expr!r}")
    if start > end:
        raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr!r}")
    if step == 0:
        raise CronError(f"step of range should be a positive number: {expr!r}")
    return _bits(start, end, step) | extra


def _field(text: str, bounds: _Bounds) -> int:
    bits = 0
    for expr in (part for part in text.split(",") if part):
        bits |= _range(expr, bounds)
    return bits


@dataclass(frozen=True)
class CronSchedule:
    """A parsed schedule: one bit set per allowed value of each field (bit 63 marks a
    field written as ``*``/``?``), or a fixed delay for ``@every``."""

    minute: int = 0
    hour: int = 0
    dom: int = 0
    month: int = 0
    dow: int = 0
    every: timedelta | None = None

    def next_after(self, t: datetime) -> datetime | None:
        """The first activation after ``t`` (robfig's ``Schedule.Next``), in UTC; None
        when there is none within five years (Go's zero time)."""
        t = t.astimezone(UTC)
        if self.every is not None:
            return t + self.every - timedelta(microseconds=t.microsecond)
        if self._never_fires():
            return None  # what robfig's search finds after five years of minutes
        try:
            return self._next(t)
        except OverflowError:  # past year 9999: Go's search would give up too
            return None

    def _next(self, t: datetime) -> datetime | None:
        # A step-for-step port of SpecSchedule.Next for a UTC schedule (so without its
        # daylight-saving corrections); the seconds field of the standard parser is 0.
        t = t.replace(microsecond=0) + timedelta(seconds=1)
        added = False
        year_limit = t.year + 5
        while True:  # WRAP
            if t.year > year_limit:
                return None
            wrapped = False
            while not (1 << t.month) & self.month:
                if not added:
                    added = True
                    t = t.replace(day=1, hour=0, minute=0, second=0)
                t = _next_month(t)
                if t.month == 1:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not self._day_matches(t):
                if not added:
                    added = True
                    t = t.replace(hour=0, minute=0, second=0)
                t = t + timedelta(days=1)
                if t.day == 1:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not (1 << t.hour) & self.hour:
                if not added:
                    added = True
                    t = t.replace(minute=0, second=0)
                t = t + timedelta(hours=1)
                if t.hour == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not (1 << t.minute) & self.minute:
                if not added:
                    added = True
                    t = t.replace(second=0)
                t = t + timedelta(minutes=1)
                if t.minute == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            while t.second != 0:  # the seconds field is always "0"
                added = True
                t = t + timedelta(seconds=1)
                if t.second == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            return t

    def _never_fires(self) -> bool:
        # A field that allows nothing (",") never matches: answer at once rather than
        # walk five years minute by minute (2.6 million steps, seconds of CPU).
        values = _STAR - 1
        if not (self.minute & values and self.hour & values and self.month & values):
            return True
        if self.dom & _STAR or self.dow & _STAR:
            return not (self.dom & values and self.dow & values)
        return not (self.dom & values or self.dow & values)

    def _day_matches(self, t: datetime) -> bool:
        dom_match = bool((1 << t.day) & self.dom)
        dow_match = bool((1 << ((t.weekday() + 1) % 7)) & self.dow)  # Go: Sunday is 0
        if self.dom & _STAR or self.dow & _STAR:
            return dom_match and dow_match
        return dom_match or dow_match


def parse_cron(schedule: str) -> CronSchedule:
    """Parse a budget schedule as Karpenter does (``cron.ParseStandard("TZ=UTC " + s)``).

    Raises :class:`CronError` (a ValueError) with robfig/cron's reason when it refuses.
    """
    if len(schedule) > _MAX_SPEC:
        raise CronError(f"a schedule longer than {_MAX_SPEC} characters")
    # "TZ=UTC <schedule>": robfig strips the prefix up to the first space, then trims.
    spec = schedule.strip(_GO_SPACE)
    if spec.startswith("@"):
        return _descriptor(spec)
    fields = _FIELDS.findall(spec)
    if len(fields) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(fields)}: {fields}")
    return CronSchedule(
        minute=_field(fields[0], _MINUTES),
        hour=_field(fields[1], _HOURS),
        dom=_field(fields[2], _DOM),
        month=_field(fields[3], _MONTHS),
        dow=_field(fields[4], _DOW),
    )


def _descriptor(spec: str) -> CronSchedule:
    minute0, hour0, dom1, month1 = 1 << 0, 1 << 0, 1 << 1, 1 << 1
    hours, doms, months, dows = _all(_HOURS), _all(_DOM), _all(_MONTHS), _all(_DOW)
    if spec in ("@yearly", "@annually"):
        return CronSchedule(minute0, hour0, dom1, month1, dows)
    if spec == "@monthly":
        return CronSchedule(minute0, hour0, dom1, months, dows)
    if spec == "@weekly":
        return CronSchedule(minute0, hour0, doms, months, 1 << 0)
    if spec in ("@daily", "@midnight"):
        return CronSchedule(minute0, hour0, doms, months, dows)
    if spec == "@hourly":
        return CronSchedule(minute0, hours, doms, months, dows)
    if spec.startswith("@every "):
        try:
            nanos = go_duration_nanoseconds(spec[len("@every "):])
        except ValueError as err:
            raise CronError(f"failed to parse duration {spec!r}: {err}") from None
        # cron.Every: whole seconds (truncated), at least one.
        seconds = nanos // 10**9 if nanos >= 10**9 else 1
        return CronSchedule(every=timedelta(seconds=seconds))
    raise CronError(f"unrecognized descriptor: {spec!r}")
