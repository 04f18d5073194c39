"""A Prometheus summary with quantiles, as client_golang exports Karpenter's.

Karpenter exports two of its metrics as summaries, not histograms:
``karpenter_pods_startup_duration_seconds`` and
``karpenter_nodes_termination_duration_seconds``, with the quantiles 0, 0.5, 0.9, 0.99
and 1 over the last ten minutes (``metrics.SummaryObjectives()``, client_golang's
default MaxAge). Its published performance dashboard reads them as
``max(karpenter_pods_startup_duration_seconds{quantile="0.5"})``; a histogram would
leave those panels empty. Neither OpenTelemetry nor ``prometheus_client`` exports
quantiles, so this collector keeps the recent observations of each label set (at most
``max_samples``, the oldest dropped first) and computes exact quantiles when
``/metrics`` is read; ``_sum`` and ``_count`` cover every observation, as in Go, and
the quantile label is written as Go writes it (``0``, ``0.5``, ``1``: the dashboard
matches the string).

:class:`Summary` has the ``record(value, attributes)`` method of an OpenTelemetry
histogram, so code recording into it does not know which it is.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

__all__ = ["QUANTILES", "Summary"]

#: Karpenter's metrics.SummaryObjectives() quantiles.
QUANTILES = (0.0, 0.5, 0.9, 0.99, 1.0)


class _Series:
    __slots__ = ("count", "recent", "sum")

    def __init__(self, max_samples: int) -> None:
        self.recent: deque[tuple[float, float]] = deque(maxlen=max_samples)
        self.count = 0
        self.sum = 0.0


def _quantile(ordered: Sequence[float], q: float) -> float:
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


class Summary(Collector):
    """A summary metric family with quantile samples (see the module docs)."""

    def __init__(
        self,
        name: str,
        description: str,
        labels: Sequence[str] = (),
        *,
        quantiles: Sequence[float] = QUANTILES,
        max_age: float = 600.0,
        max_samples: int = 10_000,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self._description = description
        self.labels = tuple(labels)
        """The label names (besides ``quantile``)."""
        self._quantiles = tuple(quantiles)
        self._max_age = max_age
        self._max_samples = max_samples
        self._now = now
        self._series: dict[tuple[str, ...], _Series] = {}
        self._lock = threading.Lock()

    def record(self, amount: float, attributes: Mapping[str, str] | None = None) -> None:
        """Observe ``amount`` for the label set ``attributes`` (missing labels are "")."""
        attrs = attributes or {}
        key = tuple(str(attrs.get(label, "")) for label in self.labels)
        with self._lock:
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = _Series(self._max_samples)
            series.recent.append((self._now(), float(amount)))
            series.count += 1
            series.sum += float(amount)

    def describe(self) -> Iterator[Metric]:
        """The family without samples."""
        yield Metric(self.name, self._description, "summary")

    def collect(self) -> Iterator[Metric]:
        """The family: per label set, each quantile of the recent window, _sum, _count."""
        horizon = self._now() - self._max_age
        family = Metric(self.name, self._description, "summary")
        with self._lock:
            snapshot = []
            for key, series in self._series.items():
                while series.recent and series.recent[0][0] < horizon:
                    series.recent.popleft()
                values = sorted(v for _, v in series.recent)
                snapshot.append((key, values, series.sum, series.count))
        for key, values, total, count in snapshot:
            labels = dict(zip(self.labels, key, strict=True))
            for q in self._quantiles:
                family.add_sample(
                    self.name, {**labels, "quantile": f"{q:g}"}, _quantile(values, q)
                )
            family.add_sample(self.name + "_sum", labels, total)
            family.add_sample(self.name + "_count", labels, float(count))
        yield family
