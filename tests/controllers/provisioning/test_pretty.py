"""Log values shaped like Karpenter's (Go durations, truncated lists)."""

from __future__ import annotations

import pytest

from karpy.apis.duration import format_go_duration
from karpy.controllers.provisioning.pretty import truncated_list


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (0.0000005, "500ns"),
        (0.0000125, "12.5µs"),
        (0.0345, "34.5ms"),
        (1.5, "1.5s"),
        (2, "2s"),
        (125.25, "2m5.25s"),
        (3600 + 61, "1h1m1s"),
    ],
)
def test_go_duration(seconds: float, text: str) -> None:
    assert format_go_duration(seconds) == text


def test_truncated_list_names_five_and_counts_the_rest() -> None:
    names = [f"t{i}" for i in range(8)]
    assert truncated_list(names) == "t0, t1, t2, t3, t4 and 3 other(s)"
    assert truncated_list(names[:5]) == "t0, t1, t2, t3, t4"
    assert truncated_list([]) == ""
