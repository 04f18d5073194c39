"""Metric label names as Karpenter's pretty.ToSnakeCase writes them."""

from __future__ import annotations

import pytest

from karpy.apis.pretty import to_snake_case


@pytest.mark.parametrize(("name", "snake"), [
    ("Underutilized", "underutilized"),
    ("KernelDeadlock", "kernel_deadlock"),
    ("WhenEmptyOrUnderutilized", "when_empty_or_underutilized"),
    ("NodeOOM", "node_oom"),           # an acronym stays one word
    ("HTTPServer", "http_server"),
    ("NetworkUnavailable2", "network_unavailable2"),
    ("Ready", "ready"),
    ("", ""),
])
def test_names_are_snake_cased_as_karpenter_does(name: str, snake: str) -> None:
    assert to_snake_case(name) == snake
