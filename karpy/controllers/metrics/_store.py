"""A store of gauge samples exported as Prometheus metrics: Karpenter's metrics.Store.

State gauges (a NodePool's usage, each node's allocatable, each pod's state) come and
go with the objects they describe, and carry per-object labels. Exported through
OpenTelemetry, every label set ever observed would stay in the SDK's memory (and count
against its 2,000-series limit); here each object's samples are replaced or deleted as
the object changes, and ``/metrics`` shows exactly what the store holds.

:class:`GaugeStore` is a ``prometheus_client`` collector registered on the manager's
registry, so these metrics appear on the same ``/metrics`` endpoint as the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from karpy.runtime import Clock

__all__ = ["Gauge", "GaugeStore", "Sample", "resource_type"]


@dataclass(frozen=True, slots=True)
class Gauge:
    """A gauge's name (Karpenter's), help text and label names."""

    name: str
    help: str
    labels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Sample:
    """One value of one gauge, with its labels. With ``since``, the value is the seconds
    from ``since`` to the moment ``/metrics`` is read (an age, exact at every scrape
    without a reconcile to refresh it; the store needs a clock). With ``since_of``, the
    start is read when ``/metrics`` is, and the sample is left out while it is None:
    for an age whose start is set or cleared by another controller than the one that
    stores the sample (it must be cheap and safe to call from the scraping thread)."""

    gauge: Gauge
    labels: Mapping[str, str]
    value: float
    since: datetime | None = None
    since_of: Callable[[], datetime | None] | None = None


def resource_type(resource: str) -> str:
    """A resource name as Karpenter writes it in the ``resource_type`` label."""
    return resource.lower().replace("-", "_")


class GaugeStore(Collector):
    """Samples grouped by the key of the object they describe (see the module docs)."""

    def __init__(self, gauges: Iterable[Gauge], *, clock: Clock | None = None) -> None:
        self._gauges = {g.name: g for g in gauges}
        self._clock = clock
        self._samples: dict[str, tuple[Sample, ...]] = {}
        # Collection may happen on another thread than the updates (a WSGI exporter).
        self._lock = threading.Lock()

    def update(self, key: str, samples: Iterable[Sample]) -> None:
        """Replace the samples of object ``key``."""
        values = tuple(samples)
        for sample in values:
            if sample.gauge.name not in self._gauges:
                raise KeyError(f"gauge {sample.gauge.name} is not part of this store")
        with self._lock:
            self._samples[key] = values

    def delete(self, key: str) -> None:
        """Forget the samples of object ``key`` (it is gone)."""
        with self._lock:
            self._samples.pop(key, None)

    def replace_all(self, samples: Mapping[str, Iterable[Sample]]) -> None:
        """Replace everything (for controllers that recompute all objects each round)."""
        fresh = {key: tuple(values) for key, values in samples.items()}
        with self._lock:
            self._samples = fresh

    def keys(self) -> list[str]:
        """The keys currently held."""
        with self._lock:
            return list(self._samples)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The metric families (no samples), so the registry can detect name clashes."""
        for gauge in self._gauges.values():
            yield GaugeMetricFamily(gauge.name, gauge.help, labels=gauge.labels)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """Every gauge with its current samples."""
        with self._lock:
            held = list(self._samples.values())
        families = {
            name: GaugeMetricFamily(name, gauge.help, labels=gauge.labels)
            for name, gauge in self._gauges.items()
        }
        now = self._clock.now() if self._clock is not None else None
        for samples in held:
            for sample in samples:
                family = families[sample.gauge.name]
                value = sample.value
                since = sample.since
                if sample.since_of is not None:
                    since = sample.since_of()
                    if since is None:
                        continue
                if since is not None and now is not None:
                    value = max(0.0, (now - since).total_seconds())
                family.add_metric(
                    [sample.labels.get(label, "") for label in sample.gauge.labels], value
                )
        yield from families.values()
