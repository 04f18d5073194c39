"""Integers and booleans read as Go's ``strconv`` reads them, so karpy accepts and refuses
exactly the text Karpenter does (checked against Go 1.24's strconv).

Python's ``int()`` is far more lenient than ``strconv.Atoi``: it strips whitespace,
takes ``"1_000"``, reads every Unicode decimal digit (Arabic-Indic ``"\\u0661"``,
full-width ``"\\uff15"``) and has no bound. Where Karpenter's value goes through
``strconv`` (a requirement's ``Gt``/``Lt`` value, CEL's ``int()``, an integer flag or
environment variable), karpy goes through here.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["INT64_MAX", "INT64_MIN", "parse_go_bool", "parse_go_int"]

INT64_MAX: Final = (1 << 63) - 1
INT64_MIN: Final = -(1 << 63)

# Base 10 as strconv.ParseInt(s, 10, bits) reads it: an optional sign, then ASCII digits
# only (re.ASCII: Python's \d would take Arabic-Indic and full-width digits).
_DECIMAL: Final = re.compile(r"[+-]?[0-9]+", re.ASCII)
# strconv.ParseBool's whole vocabulary; anything else ("yes", "TRue", " true") is an error.
_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE: Final = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_go_int(text: str, *, bits: int = 64) -> int:
    """``strconv.ParseInt(text, 10, bits)`` (``strconv.Atoi`` for bits=64).

    Raises ValueError for what Go calls invalid syntax or a value out of range.
    """
    if not isinstance(text, str):
        raise ValueError(f"{text!r} is not an integer: expected text")
    if _DECIMAL.fullmatch(text) is None:
        raise ValueError(f"{_show(text)} is not an integer (ASCII digits with an optional sign)")
    # Leading zeros are fine (Go reads "007" as 7); past 19 significant digits no int64
    # is left, so huge text is refused before Python builds a huge int from it.
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if len(text.lstrip("+-").lstrip("0")) > 19 or not low <= int(text) <= high:
        raise ValueError(f"{_show(text)} is out of range for a {bits}-bit integer")
    return int(text)


def _show(text: str) -> str:
    return repr(text) if len(text) <= 24 else repr(text[:24]) + "..."


def parse_go_bool(text: str) -> bool:
    """``strconv.ParseBool(text)``: 1, t, T, TRUE, true, True and their false twins."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{_show(text)} is not a boolean (true or false)")
