"""Quantities are read with bounded work and Kubernetes' int64 bounds: whatever the
exponent or the digits, a parse saturates, rounds or refuses before any big arithmetic
(a NodePool with ``cpu: "1e30000000"`` once froze the event loop for 39 s)."""

from __future__ import annotations

from fractions import Fraction
from math import ceil

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from karpy.apis import NodePool
from karpy.apis.quantity import canonical_quantity
from karpy.scheduling import resources as res
from karpy.scheduling.resources import parse_quantity

NANO = Fraction(1, 10**9)
MAX_QUANTITY = (1 << 63) - 1  # int64, as Kubernetes
MAX_QUANTITY_LENGTH = 64  # the CRDs' maxLength


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1e100", MAX_QUANTITY),
        ("1e10000000", MAX_QUANTITY),
        ("1e30000000", MAX_QUANTITY),
        ("-1e30000000", -MAX_QUANTITY),
        ("1e9223372036854775807", MAX_QUANTITY),
        ("9223372036854775808", MAX_QUANTITY),
        ("16Ei", MAX_QUANTITY),
        ("99999999999999999999E", MAX_QUANTITY),
        ("1e-30000000", NANO),
        ("0.0000000001", NANO),  # below a nano unit: rounds up to one, as Kubernetes does
        ("-1e-100", -NANO),
        ("1.0000000001", 1 + NANO),
        ("9223372036854775807", MAX_QUANTITY),
        ("0e30000000", 0),
        ("7Ei", 7 << 60),
    ],
)
def test_huge_and_tiny_quantities_saturate_or_round_like_kubernetes(
    text: str, expected: Fraction | int
) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("1e9223372036854775808", "exponent does not fit int64"),
        ("1e-99999999999999999999", "exponent does not fit int64"),
        ("1" * (MAX_QUANTITY_LENGTH + 1), f"longer than {MAX_QUANTITY_LENGTH} characters"),
        ("0." + "0" * 10_000_000 + "1", f"longer than {MAX_QUANTITY_LENGTH} characters"),
        ("1e1.5", "expected a number"),  # the CRD pattern allows it, ParseQuantity does not
        ("1e", "unknown suffix"),
        (".", "expected a number"),
    ],
)
def test_what_kubernetes_refuses_or_is_too_long_is_a_value_error(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_quantity(text)


def test_canonical_amounts_stay_within_int64() -> None:
    assert res.to_canonical(res.CPU, "1e30000000") == MAX_QUANTITY
    assert res.to_canonical(res.CPU, "9223372036854775807") == MAX_QUANTITY  # in millicores
    assert res.to_canonical(res.MEMORY, "-1e30000000") == -MAX_QUANTITY
    assert res.to_canonical(res.CPU, 10**400) == MAX_QUANTITY
    assert res.to_canonical(res.CPU, 1e300) == MAX_QUANTITY


_exponents = st.one_of(
    st.integers(-40, 40),
    st.integers(-(10**30), 10**30),
    st.sampled_from([MAX_QUANTITY, -MAX_QUANTITY, MAX_QUANTITY + 1, 2**31, -(2**31) - 1]),
)
_suffixes = st.sampled_from(["", "n", "u", "m", "k", "M", "G", "T", "P", "E",
                             "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e", "Qi", "x"])


@st.composite
def adversarial(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "+", "-"]))
    zeros = "0" * draw(st.integers(0, 80))
    whole = zeros + draw(st.text("0123456789", max_size=30))
    frac = draw(st.none() | st.text("0123456789", max_size=30).map(lambda f: "0" * 20 + f))
    number = whole if frac is None else f"{whole}.{frac}"
    if draw(st.booleans()):
        return f"{sign}{number}{draw(st.sampled_from('eE'))}{draw(_exponents)}"
    return f"{sign}{number}{draw(_suffixes)}"


@given(adversarial())
def test_any_quantity_text_is_refused_or_bounded_and_nano_granular(text: str) -> None:
    try:
        value = parse_quantity(text)
    except ValueError as err:
        assert "invalid quantity" in str(err)
        return
    assert len(text) <= MAX_QUANTITY_LENGTH
    assert -MAX_QUANTITY <= value <= MAX_QUANTITY
    assert (value / NANO).denominator == 1
    for resource in (res.CPU, res.MEMORY, res.PODS):
        assert -MAX_QUANTITY <= res.to_canonical(resource, text) <= MAX_QUANTITY


def _reference(digits: str, exponent: int) -> Fraction:
    exact = Fraction(int(digits)) * Fraction(10) ** exponent
    rounded = ceil(exact / NANO) * NANO
    return min(rounded, Fraction(MAX_QUANTITY))


@given(st.text("0123456789", min_size=1, max_size=25), st.integers(-45, 45))
def test_within_the_bounds_the_value_is_exact(digits: str, exponent: int) -> None:
    assert parse_quantity(f"{digits}e{exponent}") == _reference(digits, exponent)


def test_a_nodepool_limit_parse_refuses_what_the_parser_refuses() -> None:
    doc = {"spec": {"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "x"},
        "requirements": []}}, "limits": {"cpu": "1e1.5"}}}
    with pytest.raises(ValidationError, match=r"limits\.cpu"):
        NodePool.from_dict(doc)
    doc["spec"]["limits"] = {"cpu": "1e30000000"}
    pool = NodePool.from_dict(doc)
    assert pool.spec.limits == {"cpu": "1e30000000"}  # kept as written, read saturated


@pytest.mark.parametrize(("text", "canonical"), [
    ("100Gi", "100Gi"), ("1024Gi", "1Ti"), ("1024Mi", "1Gi"), ("0.5Gi", "512Mi"),
    ("1.5Ki", "1536"), ("1000", "1k"), ("1000G", "1T"), ("1500m", "1500m"), ("1.5", "1500m"),
    ("1e3", "1e3"), ("0", "0"), ("512", "512"),
])  # fmt: skip
def test_canonical_quantity_is_gos_quantity_string(text: str, canonical: str) -> None:
    # apimachinery resource.Quantity.String(); Karpenter AWS hashes volumeSize through it.
    assert canonical_quantity(text) == canonical
