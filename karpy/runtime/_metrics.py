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
``workqueue_unfinished_work_seconds``, ``workqueue_longest_running_processor_seconds``,
``controller_runtime_reconcile_panics_total`` and ``controller_runtime_reconcile_timeouts_total``
(see ``_controller``), ``controller_runtime_conversion_webhook_panics_total`` (always 0:
no webhook is served), ``leader_election_slowpath_total`` (see ``_leaderelection``), and
the client's ``client_go_request_total`` / ``client_go_request_duration_seconds`` (see
``_client_metrics``; the manager's client and the clients derived from it count into them).
The ``workqueue_*`` series are counted by each queue in plain Python and exported by a
collector on the same registry (see ``_queue_metrics``: an OTel call per queue
operation would cost more than the queue itself).
"""

from __future__ import annotations

import contextlib

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import Meter
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry, generate_latest

from ._client_metrics import ClientMetrics
from ._queue_metrics import QueueCollector, QueueRecorder, QueueView

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
        self._panics = meter.create_counter(
            "controller_runtime_reconcile_panics_total",
            description="Total number of reconciliation panics per controller",
        )
        self._timeouts = meter.create_counter(
            "controller_runtime_reconcile_timeouts_total",
            description="Total number of reconciliation timeouts per controller",
        )
        # controller-runtime registers this one whether or not a conversion webhook is
        # served, and Karpenter (which serves none since v1.1) exports it at 0. karpy
        # serves none either: the series exists, so dashboards and alerts that query it
        # resolve, and stays 0.
        meter.create_counter(
            "controller_runtime_conversion_webhook_panics_total",
            description="Total number of conversion webhook panics",
        ).add(0)
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
        self._leader = meter.create_up_down_counter(
            "leader_election_master_status",
            description="Gauge of if the reporting system is master of the relevant lease, "
            "0 indicates backup, 1 indicates master",
        )
        self._slowpath = meter.create_counter(
            "leader_election_slowpath_total",
            description="Total number of slow path exercised in renewing leader leases. "
            "'name' is the string used to identify the lease. Please make sure to group "
            "by name.",
        )
        # karpy's own (neither Karpenter nor controller-runtime has one: client-go's
        # handlers that panic crash the process). See _informer for the retry it counts.
        self._handler_errors = meter.create_counter(
            "karpy_informer_handler_errors_total",
            description="Total number of informer events an event handler raised on "
            "(each is delivered again until taken), by kind and handler method",
        )
        self._events_dropped = meter.create_counter(
            "karpy_events_dropped_total",
            description="Total number of Kubernetes Events not written, by component and "
            "cause (rate_limited: over the object's budget; queue_full: the writer fell "
            "behind; write_failed: the API server refused it)",
        )
        self._queues = QueueCollector()
        self.registry.register(self._queues)
        self.client = ClientMetrics(self.registry)
        """client-go's request metrics, which the manager's client counts into."""

    def meter(self, name: str, version: str | None = None) -> Meter:
        """An OpenTelemetry Meter whose instruments appear on this registry's /metrics."""
        return self.provider.get_meter(name, version)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric (what /metrics serves)."""
        return generate_latest(self.registry)

    def shutdown(self) -> None:
        """Detach the exporter and the queues' collector from the registry. Idempotent
        enough to call twice."""
        self.provider.shutdown()
        with contextlib.suppress(KeyError):
            self.registry.unregister(self._queues)
        self.client.unregister()

    # -- hooks for controllers and queues ----------------------------------------------

    def controller(self, name: str, workers: int) -> ControllerMetrics:
        """The instruments one controller reports to."""
        attrs = {"controller": name}
        self._max_concurrent.add(workers, attrs)
        # Present at 0 from the start, as controller-runtime initialises them: an alert
        # on increase() then fires on the first panic or timeout too.
        self._panics.add(0, attrs)
        self._timeouts.add(0, attrs)
        return ControllerMetrics(self, name)

    def queue(self, name: str, queue: QueueView) -> QueueRecorder:
        """The metrics hooks for a work queue named ``name`` (gauges read ``queue`` lazily).

        Asking again for the same name (a restarted controller's new queue) returns the
        same recorder, so its counters keep counting."""
        return self._queues.recorder(name, queue)

    def informer_handler_error(self, kind: str, handler: str) -> None:
        """Count one delivery an informer's event handler raised on
        (karpy_informer_handler_errors_total{kind, handler})."""
        self._handler_errors.add(1, {"kind": kind, "handler": handler})

    def event_dropped(self, component: str, cause: str) -> None:
        """Count one Event not written (karpy_events_dropped_total{component, cause})."""
        self._events_dropped.add(1, {"component": component, "cause": cause})

    def leader(self, lease: str, is_leader: bool) -> None:
        """Set leader_election_master_status{name=lease} to 1 or back to 0."""
        self._leader.add(1 if is_leader else -1, {"name": lease})

    def leader_slowpath(self, lease: str) -> None:
        """Count a leader's renewal that had to read the Lease first
        (leader_election_slowpath_total{name=lease}; see ``_leaderelection``)."""
        self._slowpath.add(1, {"name": lease})


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

    def error(self, *, terminal: bool, panic: bool = False, timeout: bool = False) -> None:
        """Count a reconcile error (and a terminal one, a panic or a timeout if so)."""
        self._m._reconcile_errors.add(1, self._attrs)
        if terminal:
            self._m._terminal_errors.add(1, self._attrs)
        if panic:
            self._m._panics.add(1, self._attrs)
        if timeout:
            self._m._timeouts.add(1, self._attrs)

    def worker(self, delta: int) -> None:
        """A worker became busy (+1) or idle (-1)."""
        self._m._active_workers.add(delta, self._attrs)
