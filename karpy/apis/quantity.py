"""Kubernetes resource quantities ("500m", "4Gi", "1e3"), read with bounded work.

This is the one place karpy turns quantity text into a number. It accepts what
k8s.io/apimachinery's ``ParseQuantity`` accepts and gives the exact value, with the bounds
Kubernetes itself works within:

* a value rounds up (away from zero) to a whole nano unit, as ``ParseQuantity`` rounds
  to its smallest scale: ``"0.1n"`` is ``1n``;
* a magnitude above int64 (9223372036854775807 base units) saturates there, as
  ``ParseQuantity`` caps BinarySI amounts and as an ``int64Amount`` must;
* an exponent that does not fit int64 is refused (``ParseQuantity`` says "unable to
  parse quantity's suffix"); one that does is honoured — karpy saturates instead of
  wrapping it to int32 as ``ParseQuantity`` does;
* text longer than :data:`MAX_QUANTITY_LENGTH` characters is refused; the CRDs carry the
  same ``maxLength``, so the API server refuses such a manifest first, naming the field.

Why bounded: a plain ``Fraction(10) ** exponent`` made ``cpu: "1e30000000"`` (a valid
NodePool limit) cost 39 s on the event loop that renews the leader Lease. Here the
magnitude is read off the digit count and exponent before any arithmetic, so no number
grows beyond ~100 digits and a parse costs microseconds whatever the input
(docs/performance.md has the worst case measured).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from functools import lru_cache
from typing import Final

__all__ = [
    "BINARY_SUFFIXES",
    "DECIMAL_SUFFIXES",
    "MAX_QUANTITY",
    "MAX_QUANTITY_LENGTH",
    "QUANTITY_PATTERN",
    "canonical_quantity",
    "parse_quantity",
]

#: What the API server accepts for a resource quantity (the pattern Karpenter's CRDs use).
QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
#: The longest quantity text karpy reads (and the CRDs' ``maxLength`` for one): room for
#: every int64 amount at nano precision with a suffix, several times over.
MAX_QUANTITY_LENGTH: Final = 64
#: The largest magnitude a quantity has, in base units (int64's maximum).
MAX_QUANTITY: Final = (1 << 63) - 1

BINARY_SUFFIXES: Final[Mapping[str, int]] = {
    "Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60,
}
"""Binary suffix to its power of two."""
DECIMAL_SUFFIXES: Final[Mapping[str, int]] = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}
"""Decimal suffix to its power of ten."""

_SYNTAX: Final = re.compile(
    r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+)|([a-zA-Z]*))"
)
_NANO: Final = 10**9
_INT64_DIGITS: Final = len(str(MAX_QUANTITY))  # 19


def _refuse(text: str, why: str) -> ValueError:
    return ValueError(f"invalid quantity {text!r}: {why}")


@lru_cache(maxsize=4096)
def _parse_text(text: str) -> Fraction:
    if len(text) > MAX_QUANTITY_LENGTH:
        raise _refuse(text[:MAX_QUANTITY_LENGTH] + "...",
                      f"longer than {MAX_QUANTITY_LENGTH} characters")
    body = text.strip()
    match = _SYNTAX.fullmatch(body)
    if match is None or not (match.group(2) or match.group(3)):
        raise _refuse(text, "expected a number with an optional suffix (e.g. 500m, 2, 4Gi)")
    sign, whole, frac, exponent, suffix = match.groups()
    frac = frac or ""
    power2 = 0
    if exponent is not None:
        power10 = int(exponent)  # at most 63 digits: cheap
        if abs(power10) > MAX_QUANTITY:
            raise _refuse(text, "the exponent does not fit int64")
    elif suffix in BINARY_SUFFIXES:
        power10, power2 = 0, BINARY_SUFFIXES[suffix]
    elif suffix in DECIMAL_SUFFIXES:
        power10 = DECIMAL_SUFFIXES[suffix]
    else:
        raise _refuse(text, f"unknown suffix {suffix!r} "
                            "(use n, u, m, k, M, G, T, P, E or Ki, Mi, Gi, Ti, Pi, Ei)")
    digits = (whole + frac).lstrip("0")
    if not digits:
        return Fraction(0)
    # value = digits * 10**(power10 - len(frac)) * 2**power2, and digits has len(digits)
    # digits: its order of magnitude is known before anything is multiplied out.
    scale = power10 - len(frac)
    magnitude = len(digits) + scale  # 10**(magnitude-1) <= value / 2**power2 < 10**magnitude
    negative = sign == "-"
    if magnitude - 1 > _INT64_DIGITS:
        value = Fraction(MAX_QUANTITY)
    elif magnitude + (_INT64_DIGITS if power2 else 0) < -9:
        value = Fraction(1, _NANO)  # below one nano unit (2**60 < 10**19): rounds up to it
    else:
        # |scale| <= 64 + 19 here, so this is small exact arithmetic.
        exact = Fraction(int(digits)) * Fraction(10) ** scale * (1 << power2)
        nanos = -(-exact.numerator * _NANO // exact.denominator)  # ceil to a nano unit
        value = min(Fraction(nanos, _NANO), Fraction(MAX_QUANTITY))
    return -value if negative else value


def parse_quantity(value: str | int | float) -> Fraction:
    """The value of a Kubernetes quantity (``"1500m"``, ``"2Gi"``, ``"1e3"``, ``4``),
    exact to a nano unit and within ±int64 (see the module docs).

    Raises ValueError naming the text when it is not a quantity.
    """
    if isinstance(value, bool):
        raise ValueError(f"invalid quantity {value!r}")
    if isinstance(value, int):
        return Fraction(max(-MAX_QUANTITY, min(value, MAX_QUANTITY)))
    if isinstance(value, float):
        return _parse_text(repr(value))  # "1e+300" and "inf" alike go the one way
    if not isinstance(value, str):
        raise ValueError(f"invalid quantity {value!r}: expected text or a number")
    return _parse_text(value)


_DECIMAL_BY_POWER: Final = {power: suffix for suffix, power in DECIMAL_SUFFIXES.items()}
_BINARY_BY_POWER: Final = {power: suffix for suffix, power in BINARY_SUFFIXES.items()}


def _strip_factors(amount: int, base: int) -> tuple[int, int]:
    times = 0
    while amount and amount % base == 0:
        amount //= base
        times += 1
    return amount, times


def canonical_quantity(text: str) -> str:
    """``resource.Quantity.String()`` of the quantity ``text`` (apimachinery's
    CanonicalizeBytes): ``"1024Mi"`` -> ``"1Gi"``, ``"1500m"`` -> ``"1500m"``, ``"0.5Gi"``
    -> ``"512Mi"``, ``"1000"`` -> ``"1k"``. Karpenter hashes an EBS volume size through it.

    The format is the suffix's (binary, decimal SI or exponent); a binary quantity below
    1024 or not a whole number is written in decimal SI, as Go does. Values are exact to a
    nano unit (parse_quantity); Go's big-decimal path (beyond int64) is not modelled.
    """
    body = text.strip()
    value = parse_quantity(body)
    if value == 0:
        return "0"
    match = _SYNTAX.fullmatch(body)
    suffix = match.group(5) if match else ""
    exponent_form = bool(match and match.group(4) is not None)
    binary = not exponent_form and suffix in BINARY_SUFFIXES
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if binary and magnitude >= 1024 and magnitude.denominator == 1:
        amount, times = _strip_factors(int(magnitude), 1024)
        if times > 6:  # past Ei (beyond int64 anyway): the largest suffix
            amount, times = amount * 1024 ** (times - 6), 6
        return f"{sign}{amount}{_BINARY_BY_POWER.get(times * 10, '')}"
    # Decimal: the integer mantissa without trailing zeros, then the exponent lowered to a
    # multiple of 3 (int64Amount.AsCanonicalBytes).
    nanos = int(magnitude * _NANO)
    amount, times = _strip_factors(nanos, 10)
    exponent = times - 9
    shift = exponent % 3
    amount, exponent = amount * 10**shift, exponent - shift
    if exponent_form:
        return f"{sign}{amount}" + (f"e{exponent}" if exponent else "")
    if exponent in _DECIMAL_BY_POWER:
        return f"{sign}{amount}{_DECIMAL_BY_POWER[exponent]}"
    return f"{sign}{amount}e{exponent}"
