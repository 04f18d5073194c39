"""The dashboard check itself (no cluster): every series Karpenter's published
dashboards read is one karpy's wiring exports, and :func:`dashboards.unresolved` finds
what a /metrics text lacks — a histogram where the dashboard reads a summary's
quantiles, a label the panels group by. The e2e scale-down in test_disruption.py runs
it on karpy's real /metrics."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from dashboards import dashboards, unresolved

sys.path.insert(0, str(Path(__file__).parents[1] / "controllers" / "metrics"))
from test_metrics_reference import karpy_metrics, record_instruments

FULL = """\
# TYPE karpenter_pods_startup_duration_seconds summary
karpenter_pods_startup_duration_seconds{quantile="0.5"} 3.0
"""


def test_every_dashboard_series_is_one_karpy_exports(monkeypatch: pytest.MonkeyPatch) -> None:
    emitted = set(karpy_metrics(record_instruments(monkeypatch)))
    for board, series in dashboards().items():
        for name in series:
            base = name.removesuffix("_bucket").removesuffix("_count")
            assert base in emitted, f"{board} reads {name}: karpy does not export {base}"


def test_a_histogram_leaves_the_quantile_panels_empty() -> None:
    histogram = """\
# TYPE karpenter_pods_startup_duration_seconds histogram
karpenter_pods_startup_duration_seconds_bucket{le="+Inf"} 1.0
karpenter_pods_startup_duration_seconds_count 1.0
karpenter_pods_startup_duration_seconds_sum 3.0
"""
    problems = unresolved(histogram)
    assert ("karpenter-performance-dashboard: no karpenter_pods_startup_duration_seconds "
            "sample") in problems
    problems = unresolved(FULL)
    assert ('karpenter-performance-dashboard: no karpenter_pods_startup_duration_seconds'
            '{quantile="0.99"}') in problems
    assert not any("pods_startup_duration_seconds{quantile=\"0.5\"}" in p for p in problems)
