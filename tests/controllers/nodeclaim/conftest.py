"""Fixtures for the NodeClaim controller tests: a fake clock, the in-memory API
(karpy.runtime.testing.FakeClient with the provider-ID index), the fake cloud provider,
a real EventRecorder writing Events into the fake API, Karpenter's metrics read back in
memory, and JSON log capture."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from karpy.cloudprovider import UnavailableOfferings
from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.controllers.indexes import (
    INDEX_PROVIDER_ID,
    index_node_provider_id,
    index_nodeclaim_provider_id,
)
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.nodeclaim import GarbageCollector, LifecycleController
from karpy.controllers.settings import Settings
from karpy.runtime import EventRecorder
from karpy.runtime.kinds import EVENT, NODE
from karpy.runtime.telemetry import JsonFormatter
from karpy.runtime.testing import FakeClient, FakeClock
from karpy.state.kinds import NODE_CLAIM


class Metrics:
    """Karpenter's instruments over an in-memory reader; ``value(name, **labels)`` sums
    the data points of a counter whose attributes include ``labels``."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        provider = MeterProvider(metric_readers=[self.reader])
        self.instruments = KarpenterMetrics(provider.get_meter("karpenter"))

    def value(self, name: str, **labels: str) -> float:
        data = self.reader.get_metrics_data()
        total = 0.0
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name != name:
                        continue
                    for point in metric.data.data_points:  # type: ignore[union-attr]
                        attrs = dict(point.attributes or {})
                        if all(attrs.get(k) == v for k, v in labels.items()):
                            total += point.value  # type: ignore[union-attr]
        return total


class Logs(logging.Handler):
    """Every log record, as the JSON object karpy's formatter writes."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.records: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(json.loads(self.format(record)))

    def messages(self, message: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["message"] == message]


class Events:
    """The Events the recorder wrote into the fake API."""

    def __init__(self, recorder: EventRecorder, kube: FakeClient) -> None:
        self.recorder = recorder
        self.kube = kube

    async def all(self) -> list[dict[str, Any]]:
        await self.recorder.flush()
        return self.kube.objects(EVENT)

    async def reasons(self, name: str | None = None) -> list[str]:
        return [
            e["reason"] for e in await self.all()
            if name is None or e["involvedObject"]["name"] == name
        ]

    async def messages(self, name: str | None = None) -> list[str]:
        return [
            e["message"] for e in await self.all()
            if name is None or e["involvedObject"]["name"] == name
        ]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def kube(clock: FakeClock) -> FakeClient:
    return FakeClient(clock=clock, indexers={
        (NODE_CLAIM, INDEX_PROVIDER_ID): index_nodeclaim_provider_id,
        (NODE, INDEX_PROVIDER_ID): index_node_provider_id,
    })


@pytest.fixture
def provider() -> FakeCloudProvider:
    return FakeCloudProvider()


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def settings() -> Settings:
    return Settings()


@pytest.fixture
def unavailable(clock: FakeClock) -> UnavailableOfferings:
    return UnavailableOfferings(clock=clock)


@pytest.fixture
def recorder(kube: FakeClient, clock: FakeClock) -> EventRecorder:
    return EventRecorder(kube, component="karpenter", host="test", clock=clock)  # type: ignore[arg-type]


@pytest.fixture
def events(recorder: EventRecorder, kube: FakeClient) -> Events:
    return Events(recorder, kube)


@pytest.fixture
def logs() -> Iterator[Logs]:
    handler = Logs()
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)


@pytest.fixture
def lifecycle(
    kube: FakeClient, provider: FakeCloudProvider, recorder: EventRecorder,
    unavailable: UnavailableOfferings, settings: Settings, metrics: Metrics, clock: FakeClock,
) -> LifecycleController:
    return LifecycleController(
        client=kube, index=kube, cloud_provider=provider, recorder=recorder,
        unavailable_offerings=unavailable, settings=settings, metrics=metrics.instruments,
        clock=clock,
    )


@pytest.fixture
def collector(
    kube: FakeClient, provider: FakeCloudProvider, settings: Settings, metrics: Metrics,
    clock: FakeClock,
) -> GarbageCollector:
    return GarbageCollector(
        client=kube, index=kube, cloud_provider=provider, settings=settings,
        metrics=metrics.instruments, clock=clock,
    )
