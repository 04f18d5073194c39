"""Quantities and resource lists (karpy.scheduling.resources)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.scheduling import resources as res


@pytest.mark.parametrize(
    ("resource", "quantity", "canonical"),
    [
        ("cpu", "1", 1000),
        ("cpu", "1500m", 1500),
        ("cpu", "0.5", 500),
        ("cpu", "100u", 1),  # rounded up, never to zero
        ("cpu", 2, 2000),
        ("cpu", "1e3", 1_000_000),
        ("memory", "1Gi", 1 << 30),
        ("memory", "128Mi", 128 << 20),
        ("memory", "1G", 10**9),
        ("memory", "1.5Gi", 3 << 29),
        ("memory", "100k", 100_000),
        ("ephemeral-storage", "20Gi", 20 << 30),
        ("hugepages-2Mi", "4Mi", 4 << 20),
        ("pods", "110", 110),
        ("nvidia.com/gpu", "2", 2),
    ],
)
def test_parse_to_canonical_units(resource: str, quantity: str | int, canonical: int) -> None:
    assert res.to_canonical(resource, quantity) == canonical


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", "5Qi", "1 Gi", "--1"])
def test_invalid_quantities_name_the_value(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        res.to_canonical("memory", bad)


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("cpu", 1500, "1500m"),
        ("cpu", 2000, "2"),
        ("memory", 1 << 30, "1Gi"),
        ("memory", 3 << 29, "1536Mi"),
        ("memory", 1000, "1000"),
        ("pods", 7, "7"),
    ],
)
def test_format_quantity(resource: str, amount: int, text: str) -> None:
    assert res.format_quantity(resource, amount) == text


@given(st.sampled_from(["cpu", "memory", "pods", "example.com/fpga"]), st.integers(0, 10**15))
def test_format_then_parse_is_identity(resource: str, amount: int) -> None:
    assert res.to_canonical(resource, res.format_quantity(resource, amount)) == amount


lists = st.dictionaries(st.sampled_from(["cpu", "memory", "pods", "gpu"]), st.integers(0, 10**6))


@given(lists, lists)
def test_add_then_subtract_gives_back_the_original(a: dict[str, int], b: dict[str, int]) -> None:
    back = res.subtract(res.add(a, b), b)
    assert {k: v for k, v in back.items() if v} == {k: v for k, v in a.items() if v}


@given(lists, lists)
def test_fits_matches_per_resource_comparison(a: dict[str, int], b: dict[str, int]) -> None:
    expected = all(amount <= b.get(name, 0) for name, amount in a.items() if amount > 0)
    assert res.fits(a, b) is expected
    assert (res.exceeded(a, b) == []) is expected


@given(lists, lists)
def test_maximum_and_minimum_bound_both_lists(a: dict[str, int], b: dict[str, int]) -> None:
    high = res.maximum(a, b)
    assert res.fits(a, high) and res.fits(b, high)
    low = res.minimum(a, b)
    assert set(low) == set(a) & set(b)
    assert all(low[k] == min(a[k], b[k]) for k in low)


def test_zero_requests_fit_a_node_without_the_resource() -> None:
    assert res.fits({"nvidia.com/gpu": 0, "cpu": 100}, {"cpu": 1000})
    assert res.exceeded({"nvidia.com/gpu": 1}, {"cpu": 1000}) == ["nvidia.com/gpu"]


def test_describe_is_readable() -> None:
    text = res.describe(res.parse_resource_list({"cpu": "1500m", "memory": "4Gi", "pods": 1}))
    assert text == "cpu=1500m, memory=4Gi, pods=1"
