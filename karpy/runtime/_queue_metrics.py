"""The work queues' metrics: counted in plain Python, exported when /metrics is scraped.

Why not OpenTelemetry instruments, like the rest of the runtime's metrics: a synchronous
OTel call (``Counter.add``, ``Histogram.record``) costs about 20 µs in the Python SDK
(attribute hashing, a lock, exemplar checks), and client-go's workqueue metrics take five
of them for every key that goes through a queue — add, take and done fell from ~330k to
~10k per second. A queue's measurements are few and fixed (two counters, a depth, two
histograms on fixed buckets), so each queue keeps them as integers and bucket counts
(a ``bisect`` and two additions per observation), and one ``prometheus_client`` collector
on the manager's registry turns them into the same series the OTel exporter wrote:
controller-runtime's ``workqueue_*`` names, labels ``{controller, name}`` and client-go's
buckets. Everything runs on the event loop that also serves /metrics, so a scrape sees
a consistent snapshot without locks.
"""

from __future__ import annotations

import weakref
from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import Protocol, cast

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

__all__ = ["QUEUE_BUCKETS", "QueueCollector", "QueueRecorder"]

# client-go workqueue: ExponentialBuckets(10e-9, 10, 12) → 1e-8 s .. 1e3 s.
QUEUE_BUCKETS = tuple(1e-8 * 10**i for i in range(12))
_go_float = cast(Callable[[float], str], floatToGoString)  # untyped in prometheus_client
_LE = [_go_float(b) for b in QUEUE_BUCKETS] + ["+Inf"]
_LABELS = ["controller", "name"]
_Bounds = tuple[float, ...]
_Bisect = Callable[[_Bounds, float], int]


class QueueView(Protocol):
    """What the scrape-time gauges read from a queue."""

    def unfinished_work_seconds(self) -> float: ...
    def longest_running_processor_seconds(self) -> float: ...


class _Histogram:
    """Counts per bucket (not cumulative; the last is +Inf) and the sum of observations."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(QUEUE_BUCKETS) + 1)
        self.total = 0.0

    def observe(
        self, value: float, _at: _Bisect = bisect_left, _bounds: _Bounds = QUEUE_BUCKETS
    ) -> None:
        # A value equal to a bound belongs to that bucket (Prometheus' "le"). The bisect
        # and the bounds are default arguments so the hot path reads locals, not globals.
        self.counts[_at(_bounds, value)] += 1
        self.total += value

    def family_sample(self) -> tuple[list[tuple[str, float]], float]:
        buckets: list[tuple[str, float]] = []
        running = 0
        for le, count in zip(_LE, self.counts, strict=True):
            running += count
            buckets.append((le, running))
        return buckets, self.total


class QueueRecorder:
    """One queue's measurements; implements the work queue's ``QueueMetrics`` hooks.

    The depth is not counted separately: every key counted by ``added`` leaves the queue
    through exactly one ``taken``, so depth is adds minus the queue-duration count.
    """

    __slots__ = (
        "_queue",
        "adds",
        "finished",
        "name",
        "queue_duration",
        "retries",
        "taken",
        "work_duration",
    )

    def __init__(self, name: str, queue: QueueView) -> None:
        self.name = name
        self.adds = 0
        self.retries = 0
        self.queue_duration = _Histogram()
        self.work_duration = _Histogram()
        self.taken: Callable[[float], None] = self.queue_duration.observe
        self.finished: Callable[[float], None] = self.work_duration.observe
        self._queue: weakref.ref[QueueView] = weakref.ref(queue)

    @property
    def depth(self) -> int:
        """Keys added and not yet taken by a worker (client-go's workqueue_depth)."""
        return self.adds - sum(self.queue_duration.counts)

    def watch(self, queue: QueueView) -> None:
        """Read the gauges from ``queue`` from now on (a restarted controller's new queue);
        the counters carry on, as Prometheus expects of a counter."""
        self._queue = weakref.ref(queue)

    def queue(self) -> QueueView | None:
        """The queue the gauges read, or None once it is gone."""
        return self._queue()

    # -- the QueueMetrics hooks, run for every key (``taken`` and ``finished`` are the
    # -- histograms' own ``observe``, bound in __init__: one call each).

    def added(self) -> None:
        self.adds += 1

    def retried(self) -> None:
        self.retries += 1


class QueueCollector:
    """A ``prometheus_client`` collector for every queue's :class:`QueueRecorder`."""

    def __init__(self) -> None:
        self._recorders: dict[str, QueueRecorder] = {}

    def recorder(self, name: str, queue: QueueView) -> QueueRecorder:
        """The recorder for the queue named ``name``; the same one if it is asked again."""
        existing = self._recorders.get(name)
        if existing is not None:
            existing.watch(queue)
            return existing
        recorder = self._recorders[name] = QueueRecorder(name, queue)
        return recorder

    def collect(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily("workqueue_depth", "Current depth of workqueue", labels=_LABELS)
        adds = CounterMetricFamily(
            "workqueue_adds_total", "Total number of adds handled by workqueue", labels=_LABELS
        )
        queue_duration = HistogramMetricFamily(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            labels=_LABELS,
            unit="seconds",
        )
        work_duration = HistogramMetricFamily(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            labels=_LABELS,
            unit="seconds",
        )
        retries = CounterMetricFamily(
            "workqueue_retries_total",
            "Total number of retries handled by workqueue",
            labels=_LABELS,
        )
        unfinished = GaugeMetricFamily(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration",
            labels=_LABELS,
            unit="seconds",
        )
        longest = GaugeMetricFamily(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            labels=_LABELS,
            unit="seconds",
        )
        for name, rec in self._recorders.items():
            labels = [name, name]
            depth.add_metric(labels, rec.depth)
            adds.add_metric(labels, rec.adds)
            retries.add_metric(labels, rec.retries)
            buckets, total = rec.queue_duration.family_sample()
            queue_duration.add_metric(labels, buckets, total)
            buckets, total = rec.work_duration.family_sample()
            work_duration.add_metric(labels, buckets, total)
            queue = rec.queue()
            if queue is not None:
                unfinished.add_metric(labels, queue.unfinished_work_seconds())
                longest.add_metric(labels, queue.longest_running_processor_seconds())
        yield from (depth, adds, queue_duration, work_duration, retries, unfinished, longest)
