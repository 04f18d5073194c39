"""The moments the pod latency metrics start from: each kept the first time, the
'found a place' one dropped when a later round finds none."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from karpy.state.pod_scheduling import PodSchedulingTimes

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_pod_that_loses_its_place_is_timed_from_the_round_that_finds_it_again() -> None:
    times = PodSchedulingTimes()
    times.ack("default/web", at(0))
    times.ack("default/web", at(3))  # seen again: still first seen at 0
    assert times.mark_decisions(at(4), failed=(), placed=["default/web"]) == [4.0]
    assert times.mark_decisions(at(6), failed=["default/web"], placed=()) == []
    assert times.schedulable("default/web") is None
    assert times.mark_decisions(at(9), failed=(), placed=["default/web"]) == []
    assert (times.acked("default/web"), times.decided("default/web"),
            times.schedulable("default/web")) == (at(0), at(4), at(9))


def test_a_pod_never_acknowledged_is_decided_without_a_wait() -> None:
    """A pod karpy did not see pending (e.g. from a deleting node) has no wait to time."""
    times = PodSchedulingTimes()
    assert times.mark_decisions(at(1), failed=["default/x"], placed=()) == []
    assert times.decided("default/x") == at(1)
    times.clear("default/x")
    assert len(times) == 0
