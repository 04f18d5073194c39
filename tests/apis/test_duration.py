"""Go duration text: parsed as time.ParseDuration parses it (its int64 limit included),
printed as Duration.String prints it — one module for both."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.apis.duration import (
    MAX_DURATION,
    format_go_duration,
    go_duration_nanoseconds,
    parse_duration,
    parse_nillable_duration,
)

MAX_NANOS = (1 << 63) - 1


@pytest.mark.parametrize(
    "text",
    ["2562048h", "99999999h", "2562047h47m16.854775808s", "9223372036854775808ns",
     "1" * 40 + "s", "2562047h2562047h", "153722868m"],
)
def test_durations_beyond_gos_limit_are_a_value_error_naming_the_text(text: str) -> None:
    with pytest.raises(ValueError, match="Go durations end at 2562047h") as raised:
        parse_duration(text)
    assert repr(text) in str(raised.value)


def test_the_limit_itself_parses() -> None:
    assert go_duration_nanoseconds("2562047h47m16.854775807s") == MAX_NANOS
    assert go_duration_nanoseconds("9223372036854775807ns") == MAX_NANOS
    assert parse_duration("2562047h") == timedelta(hours=2562047)
    assert parse_duration("2562047h47m16.854775807s") == MAX_DURATION
    assert go_duration_nanoseconds("-2562047h47m16.854775808s") == -(1 << 63)


@given(st.text(alphabet="0123456789.hmsnuµ+-", max_size=40))
def test_any_text_parses_or_is_a_value_error_and_stays_within_int64(text: str) -> None:
    try:
        nanos = go_duration_nanoseconds(text)
    except ValueError:
        return
    assert -(1 << 63) <= nanos <= MAX_NANOS
    parse_duration(text)  # a timedelta always holds it


@given(st.integers(-(MAX_NANOS // 1000), MAX_NANOS // 1000))
def test_what_go_prints_parses_back_to_the_same_duration(micros: int) -> None:
    text = format_go_duration(timedelta(microseconds=micros))
    assert go_duration_nanoseconds(text) == micros * 1000
    assert parse_duration(text) == timedelta(microseconds=micros)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1.5h", 5_400 * 10**9), (".5s", 500_000_000), ("1.s", 10**9), ("1µs", 1_000),
     ("1\u03bcs", 1_000), ("0", 0), ("-1m", -60 * 10**9), ("+1m", 60 * 10**9),
     ("1h0m0s", 3_600 * 10**9), ("0." + "0" * 120 + "1s", 0)],
)
def test_gos_grammar(text: str, expected: int) -> None:
    assert go_duration_nanoseconds(text) == expected


@pytest.mark.parametrize("text", ["", "s", "1", ".s", "1x", "5 minutes", "-", "1h 2m"])
def test_what_go_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        go_duration_nanoseconds(text)


def test_text_longer_than_128_characters_is_refused_before_it_is_read() -> None:
    assert go_duration_nanoseconds("1h" * 64) == 64 * 3_600 * 10**9
    with pytest.raises(ValueError, match="longer than 128 characters"):
        go_duration_nanoseconds("1h" * 500_000)


def test_never_is_none() -> None:
    assert parse_nillable_duration("Never") is None
    assert parse_nillable_duration("1h") == timedelta(hours=1)


def test_the_longest_duration_prints_like_go() -> None:
    assert format_go_duration(timedelta(microseconds=MAX_NANOS // 1000)) == (
        "2562047h47m16.854775s"
    )
