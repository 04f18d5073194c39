"""Karpenter's histograms keep Karpenter's bucket boundaries, so its dashboards'
histogram_quantile() over ``_bucket`` series reads the same on karpy (the boundaries as
kubernetes-sigs/karpenter v1.14 declares them: pkg/metrics/constants.go DurationBuckets,
prometheus.DefBuckets for the cloud provider's method durations, ExponentialBuckets for
NodeClaim termination)."""

from __future__ import annotations

import re

import pytest

from karpy.controllers.instruments import KarpenterMetrics
from karpy.runtime.telemetry import Metrics

# pkg/metrics/constants.go DurationBuckets(): controller-runtime's, plus 120 .. 600 s
KARPENTER_DURATION = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7,
    0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15,
    20, 25, 30, 40, 50, 60, 120, 150, 300, 450, 600,
]
PROMETHEUS_DEFAULT = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
EXPONENTIAL_1_2_12 = [float(2**i) for i in range(12)]
EXPONENTIAL_1_2_11 = [float(2**i) for i in range(11)]

EXPECTED = {
    "karpenter_pods_bound_duration_seconds": KARPENTER_DURATION,
    "karpenter_pods_scheduling_decision_duration_seconds": KARPENTER_DURATION,
    "karpenter_pods_provisioning_bound_duration_seconds": KARPENTER_DURATION,
    "karpenter_pods_provisioning_startup_duration_seconds": KARPENTER_DURATION,
    "karpenter_scheduler_scheduling_duration_seconds": KARPENTER_DURATION,
    "karpenter_voluntary_disruption_decision_evaluation_duration_seconds":
        KARPENTER_DURATION,
    "karpenter_cloudprovider_duration_seconds": PROMETHEUS_DEFAULT,
    "karpenter_nodeclaims_termination_duration_seconds": EXPONENTIAL_1_2_12,
    "karpenter_nodeclaims_instance_termination_duration_seconds": EXPONENTIAL_1_2_11,
}


def _histograms(metrics: KarpenterMetrics) -> dict[str, object]:
    found: dict[str, object] = {}
    for value in vars(metrics).values():
        name = getattr(value, "name", None)
        if isinstance(name, str) and name in EXPECTED:
            found[name] = value
    return found


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_histogram_has_karpenters_buckets(name: str) -> None:
    registry = Metrics()
    metrics = KarpenterMetrics(registry.meter("karpenter"), registry.registry)
    histogram = _histograms(metrics)[name]
    histogram.record(0.001)  # type: ignore[attr-defined]
    text = registry.render().decode()
    bounds = [float(b) for b in re.findall(rf'^{name}_bucket{{.*le="([^"]+)"', text, re.M)
              if b != "+Inf"]  # fmt: skip
    assert bounds == [float(b) for b in EXPECTED[name]]
