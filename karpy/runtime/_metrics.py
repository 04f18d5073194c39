"""Prometheus metrics through OpenTelemetry, under controller-runtime's names.

:class:`Metrics` owns one OpenTelemetry ``MeterProvider`` whose Prometheus reader writes
into its own ``prometheus_client`` registry — one per manager, never the global one, so
two managers in one process (or tests) do not collide. Other code adds its own
instruments to the same ``/metrics`` endpoint with ``metrics.meter("karpenter")``.

Instrument names, labels and histogram buckets follow controller-runtime and client-go's
workqueue, so existing dashboards work: ``controller_runtime_reconcile_total{controller,
result}``, ``controller_runtime_reconcile_errors_total``,
``controller_runtime_reconcile_time_seconds``, ``workqueue_depth{name,controller}``,
``workqueue_adds_total``, ``workqueue_queue_duration_seconds``,
``workqueue_work_duration_seconds``, ``workqueue_retries_total``,
``workqueue_unfinished_work_seconds``, ``workqueue_longest_running_processor_seconds``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import Protocol

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry, generate_latest

__all__ = ["ControllerMetrics", "Metrics"]

# controller-runtime's reconcile_time buckets.
RECONCILE_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.15,
    0.2,
    0.25,
    0.3,
    0.35,
    0.4,
    0.45,
    0.5,
    0.6,
    0.7,
    0.8,
    0.9,
    1.0,
    1.25,
    1.5,
    1.75,
    2.0,
    2.5,
    3.0,
    3.5,
    4.0,
    4.5,
    5.0,
    6.0,
    7.0,
    8.0,
    9.0,
    10.0,
    15.0,
    20.0,
    25.0,
    30.0,
    40.0,
    50.0,
    60.0,
)
# client-go workqueue: ExponentialBuckets(10e-9, 10, 12) → 1e-8 s .. 1e3 s.
QUEUE_BUCKETS = tuple(1e-8 * 10**i for i in range(12))


class _QueueView(Protocol):
    def __len__(self) -> int: ...
    def unfinished_work_seconds(self) -> float: ...
    def longest_running_processor_seconds(self) -> float: ...


class Metrics:
    """A per-manager metrics registry: an OTel MeterProvider exported for Prometheus."""

    def __init__(self, *, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._reader = PrometheusMetricReader(
            disable_target_info=True, scope_info_enabled=False, registry=self.registry
        )
        self.provider = MeterProvider(metric_readers=[self._reader])
        meter = self.provider.get_meter("karpy.runtime")
        self._reconcile_total = meter.create_counter(
            "controller_runtime_reconcile_total",
            description="Total number of reconciliations per controller",
        )
        self._reconcile_errors = meter.create_counter(
            "controller_runtime_reconcile_errors_total",
            description="Total number of reconciliation errors per controller",
        )
        self._terminal_errors = meter.create_counter(
            "controller_runtime_terminal_reconcile_errors_total",
            description="Total number of terminal reconciliation errors per controller",
        )
        self._reconcile_time = meter.create_histogram(
            "controller_runtime_reconcile_time_seconds",
            unit="s",
            description="Length of time per reconciliation per controller",
            explicit_bucket_boundaries_advisory=RECONCILE_BUCKETS,
        )
        self._active_workers = meter.create_up_down_counter(
            "controller_runtime_active_workers",
            description="Number of currently used workers per controller",
        )
        self._max_concurrent = meter.create_up_down_counter(
            "controller_runtime_max_concurrent_reconciles",
            description="Maximum number of concurrent reconciles per controller",
        )
        self._depth = meter.create_up_down_counter(
            "workqueue_depth", description="Current depth of workqueue"
        )
        self._adds = meter.create_counter(
            "workqueue_adds_total", description="Total number of adds handled by workqueue"
        )
        self._retries = meter.create_counter(
            "workqueue_retries_total", description="Total number of retries handled by workqueue"
        )
        self._queue_duration = meter.create_histogram(
            "workqueue_queue_duration_seconds",
            unit="s",
            description="How long in seconds an item stays in workqueue before being requested",
            explicit_bucket_boundaries_advisory=QUEUE_BUCKETS,
        )
        self._work_duration = meter.create_histogram(
            "workqueue_work_duration_seconds",
            unit="s",
            description="How long in seconds processing an item from workqueue takes",
            explicit_bucket_boundaries_advisory=QUEUE_BUCKETS,
        )
        self._leader = meter.create_up_down_counter(
            "leader_election_master_status",
            description="Gauge of if the reporting system is master of the relevant lease, "
            "0 indicates backup, 1 indicates master",
        )
        self._queues: dict[str, weakref.ref[_QueueView]] = {}
        meter.create_observable_gauge(
            "workqueue_unfinished_work_seconds",
            callbacks=[self._observe(lambda q: q.unfinished_work_seconds())],
            unit="s",
            description="How many seconds of work has been done that is in progress and "
            "hasn't been observed by work_duration",
        )
        meter.create_observable_gauge(
            "workqueue_longest_running_processor_seconds",
            callbacks=[self._observe(lambda q: q.longest_running_processor_seconds())],
            unit="s",
            description="How many seconds has the longest running processor for workqueue "
            "been running",
        )

    def meter(self, name: str, version: str | None = None) -> Meter:
        """An OpenTelemetry Meter whose instruments appear on this registry's /metrics."""
        return self.provider.get_meter(name, version)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric (what /metrics serves)."""
        return generate_latest(self.registry)

    def shutdown(self) -> None:
        """Detach the exporter from the registry. Idempotent enough to call twice."""
        self.provider.shutdown()

    # -- hooks for controllers and queues ----------------------------------------------

    def controller(self, name: str, workers: int) -> ControllerMetrics:
        """The instruments one controller reports to."""
        self._max_concurrent.add(workers, {"controller": name})
        return ControllerMetrics(self, name)

    def queue(self, name: str, queue: _QueueView) -> QueueMetrics:
        """The QueueMetrics for a work queue named ``name`` (gauges read ``queue`` lazily)."""
        self._queues[name] = weakref.ref(queue)
        return QueueMetrics(self, name)

    def leader(self, lease: str, is_leader: bool) -> None:
        """Set leader_election_master_status{name=lease} to 1 or back to 0."""
        self._leader.add(1 if is_leader else -1, {"name": lease})

    def _observe(
        self, read: Callable[[_QueueView], float]
    ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def callback(options: CallbackOptions) -> Iterable[Observation]:
            out = []
            for name, ref in list(self._queues.items()):
                queue = ref()
                if queue is None:
                    del self._queues[name]
                    continue
                out.append(Observation(read(queue), {"name": name, "controller": name}))
            return out

        return callback


class QueueMetrics:
    """Implements the work queue's metrics hooks on a :class:`Metrics` registry."""

    __slots__ = ("_attrs", "_m")

    def __init__(self, metrics: Metrics, name: str) -> None:
        self._m = metrics
        self._attrs = {"name": name, "controller": name}

    def added(self) -> None:
        self._m._depth.add(1, self._attrs)
        self._m._adds.add(1, self._attrs)

    def taken(self, waited: float) -> None:
        self._m._depth.add(-1, self._attrs)
        self._m._queue_duration.record(waited, self._attrs)

    def finished(self, worked: float) -> None:
        self._m._work_duration.record(worked, self._attrs)

    def retried(self) -> None:
        self._m._retries.add(1, self._attrs)


class ControllerMetrics:
    """The per-controller instruments (reconcile counts, errors, durations, workers)."""

    __slots__ = ("_attrs", "_m", "_results")

    def __init__(self, metrics: Metrics, name: str) -> None:
        self._m = metrics
        self._attrs = {"controller": name}
        self._results = {
            r: {"controller": name, "result": r}
            for r in ("success", "error", "requeue", "requeue_after")
        }

    def reconciled(self, result: str, seconds: float) -> None:
        """Count one reconcile with ``result`` (success/error/requeue/requeue_after)."""
        self._m._reconcile_total.add(1, self._results[result])
        self._m._reconcile_time.record(seconds, self._attrs)

    def error(self, *, terminal: bool) -> None:
        """Count a reconcile error (and a terminal one if so)."""
        self._m._reconcile_errors.add(1, self._attrs)
        if terminal:
            self._m._terminal_errors.add(1, self._attrs)

    def worker(self, delta: int) -> None:
        """A worker became busy (+1) or idle (-1)."""
        self._m._active_workers.add(delta, self._attrs)
