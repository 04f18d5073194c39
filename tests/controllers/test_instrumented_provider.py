"""The provider wrapper fills Karpenter's cloud-provider metrics for any provider."""

from __future__ import annotations

import pytest

from karpy.cloudprovider import NodeClaimNotFoundError
from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.controllers.instrumented_provider import InstrumentedCloudProvider
from karpy.controllers.instruments import KarpenterMetrics
from karpy.runtime.telemetry import Metrics


async def test_calls_are_timed_and_errors_counted_by_method_and_type() -> None:
    registry = Metrics()
    provider = InstrumentedCloudProvider(
        FakeCloudProvider(), KarpenterMetrics(registry.meter("karpenter"))
    )
    assert await provider.list() == []
    with pytest.raises(NodeClaimNotFoundError):
        await provider.get("fake://missing")

    text = registry.render().decode()
    assert (
        'karpenter_cloudprovider_duration_seconds_count{method="List",provider="fake"} 1.0'
        in text
    )
    assert (
        'karpenter_cloudprovider_errors_total{error="NodeClaimNotFoundError",method="Get",'
        'provider="fake"} 1.0' in text
    )
