"""Rate limiters: client-go's delays, per item and overall."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.runtime.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
)
from karpy.runtime.testing import FakeClock


def test_exponential_doubles_from_5ms_and_caps_at_1000s() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    delays = [limiter.when("a") for _ in range(25)]
    assert delays[:4] == pytest.approx([0.005, 0.01, 0.02, 0.04])
    assert max(delays) == 1000.0
    assert delays[-1] == 1000.0
    assert limiter.num_requeues("a") == 25


def test_exponential_tracks_items_separately_and_forget_resets() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    for _ in range(5):
        limiter.when("slow")
    assert limiter.when("fresh") == pytest.approx(0.005)
    limiter.forget("slow")
    assert limiter.num_requeues("slow") == 0
    assert limiter.when("slow") == pytest.approx(0.005)


def test_exponential_survives_huge_failure_counts() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    for _ in range(2000):
        delay = limiter.when("x")
    assert delay == 1000.0


@given(st.integers(min_value=1, max_value=200))
def test_exponential_is_monotonic_and_bounded(failures: int) -> None:
    limiter: ItemExponentialFailureRateLimiter[int] = ItemExponentialFailureRateLimiter(
        base_delay=0.005, max_delay=1000.0
    )
    delays = [limiter.when(1) for _ in range(failures)]
    assert all(a <= b for a, b in itertools.pairwise(delays))
    assert all(0.005 <= d <= 1000.0 for d in delays)


def test_bucket_allows_a_burst_then_spaces_at_qps() -> None:
    clock = FakeClock()
    bucket: BucketRateLimiter[int] = BucketRateLimiter(qps=10, burst=100, clock=clock)
    assert [bucket.when(i) for i in range(100)] == [0.0] * 100
    # The 101st and 102nd go into debt: 0.1 s and 0.2 s.
    assert bucket.when(100) == pytest.approx(0.1)
    assert bucket.when(101) == pytest.approx(0.2)
    clock.advance(1.0)  # repays 10 tokens: the debt of 2 and 8 spare
    assert [bucket.when(i) for i in range(8)] == [0.0] * 8
    assert bucket.when(9) == pytest.approx(0.1)


@given(st.lists(st.floats(min_value=0, max_value=5), min_size=1, max_size=300))
def test_bucket_never_exceeds_burst_plus_rate(gaps: list[float]) -> None:
    clock = FakeClock()
    bucket: BucketRateLimiter[int] = BucketRateLimiter(qps=10, burst=100, clock=clock)
    # Every reservation is scheduled at now + delay; in any window of length T starting
    # at 0, at most burst + qps*T reservations may fall due.
    due = []
    for i, gap in enumerate(gaps):
        clock.advance(gap)
        due.append(clock.monotonic() + bucket.when(i))
    horizon = max(due)
    assert len(due) <= 100 + 10 * horizon + 1e-6


def test_fast_slow() -> None:
    limiter: ItemFastSlowRateLimiter[str] = ItemFastSlowRateLimiter(
        fast_delay=0.1, slow_delay=10, max_fast_attempts=2
    )
    assert [limiter.when("a") for _ in range(4)] == [0.1, 0.1, 10, 10]
    limiter.forget("a")
    assert limiter.when("a") == 0.1


def test_max_of_takes_the_longest_and_forgets_everywhere() -> None:
    clock = FakeClock()
    limiter: MaxOfRateLimiter[str] = MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(base_delay=1, max_delay=100),
        BucketRateLimiter(qps=1, burst=1, clock=clock),
    )
    assert limiter.when("a") == 1  # bucket free, exponential 1 s
    assert limiter.when("b") == 1  # bucket: 1 s of debt; exponential 1 s
    assert limiter.when("a") == 2  # exponential 2 s, bucket 2 s of debt
    assert limiter.num_requeues("a") == 2
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0


def test_default_controller_rate_limiter_is_client_go_default() -> None:
    clock = FakeClock()
    limiter: MaxOfRateLimiter[str] = default_controller_rate_limiter(clock)
    assert limiter.when("a") == pytest.approx(0.005)
    assert limiter.when("a") == pytest.approx(0.010)
    # 98 more distinct items drain the burst; then the overall bucket dominates.
    for i in range(98):
        limiter.when(f"k{i}")
    assert limiter.when("new") == pytest.approx(0.1)


def test_invalid_parameters_are_refused() -> None:
    with pytest.raises(ValueError):
        ItemExponentialFailureRateLimiter(base_delay=0)
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=0)
    with pytest.raises(ValueError):
        MaxOfRateLimiter()
