"""Karpenter's Prometheus metrics, under Karpenter's names (``karpenter_*``).

One :class:`KarpenterMetrics` is built per operator from the manager's OpenTelemetry
meter, so the instruments appear on the same ``/metrics`` endpoint as the runtime's
controller_runtime_* and workqueue_* metrics; the two that Karpenter exports as
summaries, and the one gauge whose series come and go, are prometheus_client collectors
registered on the manager's registry.
Controllers receive it through ``Deps`` and record events where they happen; gauges
that describe state (NodePool usage and limits, node counts) are observed by the
metrics controllers from the cluster model.
"""

from __future__ import annotations

from opentelemetry.metrics import Meter
from prometheus_client import CollectorRegistry, Gauge

from karpy.controllers.summary import Summary

__all__ = ["DURATION_BUCKETS", "LIFETIME_BUCKETS", "KarpenterMetrics"]

# Karpenter's DurationBuckets() (pkg/metrics/constants.go): controller-runtime's
# thresholds plus 120 .. 600 s for singleton controllers, for pod latencies, scheduling
# and disruption evaluation.
DURATION_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7,
    0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0,
    10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 120.0, 150.0, 300.0, 450.0, 600.0,
)
# prometheus.DefBuckets: Karpenter's cloud provider method durations set none.
PROMETHEUS_DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# Karpenter's node lifetime buckets: 15 min .. 30 days.
LIFETIME_BUCKETS = tuple(
    float(m * 60) for m in (15, 30, 45, 60, 120, 240, 360, 480, 600, 720, 960, 1200)
) + tuple(float(d * 86400) for d in (1, 2, 3, 5, 10, 15, 20, 25, 30))


class KarpenterMetrics:
    """The counters and histograms the controllers record into.

    Label names follow Karpenter's: ``nodepool``, ``reason``, ``capacity_type``,
    ``controller``, ``resource_type``.
    """

    def __init__(self, meter: Meter, registry: CollectorRegistry | None = None) -> None:
        self.nodeclaims_created = meter.create_counter(
            "karpenter_nodeclaims_created_total",
            description="Number of nodeclaims created in total by Karpenter. Labeled by "
            "reason the nodeclaim was created and the owning nodepool.",
        )
        self.nodeclaims_launched = meter.create_counter(
            "karpenter_nodeclaims_launched_total",
            description="Number of nodeclaims launched in total by Karpenter. Labeled by "
            "the owning nodepool.",
        )
        self.nodeclaims_registered = meter.create_counter(
            "karpenter_nodeclaims_registered_total",
            description="Number of nodeclaims registered in total by Karpenter. Labeled by "
            "the owning nodepool.",
        )
        self.nodeclaims_initialized = meter.create_counter(
            "karpenter_nodeclaims_initialized_total",
            description="Number of nodeclaims initialized in total by Karpenter. Labeled by "
            "the owning nodepool.",
        )
        self.nodeclaims_terminated = meter.create_counter(
            "karpenter_nodeclaims_terminated_total",
            description="Number of nodeclaims terminated in total by Karpenter. Labeled by "
            "the owning nodepool.",
        )
        self.nodeclaims_disrupted = meter.create_counter(
            "karpenter_nodeclaims_disrupted_total",
            description="Number of nodeclaims disrupted in total by Karpenter. Labeled by "
            "reason the nodeclaim was disrupted and the owning nodepool.",
        )
        self.nodes_created = meter.create_counter(
            "karpenter_nodes_created_total",
            description="Number of nodes created in total by Karpenter. Labeled by owning "
            "nodepool.",
        )
        self.nodes_terminated = meter.create_counter(
            "karpenter_nodes_terminated_total",
            description="Number of nodes terminated in total by Karpenter. Labeled by owning "
            "nodepool.",
        )
        self.nodes_drained = meter.create_counter(
            "karpenter_nodes_drained_total",
            description="The total number of nodes drained by Karpenter",
        )
        # Summaries in Karpenter (see karpy.controllers.summary), on ``registry``.
        self.pods_startup_duration = Summary(
            "karpenter_pods_startup_duration_seconds",
            "The time from pod creation until the pod is running.",
        )
        self.pods_bound_duration = meter.create_histogram(
            "karpenter_pods_bound_duration_seconds", unit="s",
            description="The time from pod creation until the pod is bound.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        # Measured from moments in karpy's memory (karpy.state.pod_scheduling), not from
        # the pod's creation: how long karpy, rather than the pod's history, made it wait.
        self.pods_scheduling_decision_duration = meter.create_histogram(
            "karpenter_pods_scheduling_decision_duration_seconds", unit="s",
            description="The time it takes for Karpenter to first try to schedule a pod "
            "after it's been seen.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.pods_provisioning_bound_duration = meter.create_histogram(
            "karpenter_pods_provisioning_bound_duration_seconds", unit="s",
            description="The time from when Karpenter first thinks the pod can schedule "
            "until it binds. Note: this calculated from a point in memory, not by the pod "
            "creation timestamp.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.pods_provisioning_startup_duration = meter.create_histogram(
            "karpenter_pods_provisioning_startup_duration_seconds", unit="s",
            description="The time from when Karpenter first thinks the pod can schedule "
            "until the pod is running. Note: this calculated from a point in memory, not by "
            "the pod creation timestamp.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.scheduling_duration = meter.create_histogram(
            "karpenter_scheduler_scheduling_duration_seconds", unit="s",
            description="Duration of scheduling simulations used for deprovisioning and "
            "provisioning in seconds.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.scheduler_ignored_pods = meter.create_gauge(
            "karpenter_scheduler_ignored_pods_count",
            description="Number of pods ignored during scheduling by Karpenter",
        )
        self.scheduler_unschedulable_pods = meter.create_gauge(
            "karpenter_scheduler_unschedulable_pods_count",
            description="The number of unschedulable Pods.",
        )
        # A prometheus_client gauge, not an OpenTelemetry one: each round replaces the
        # zones (Karpenter deletes the controller's series first), and OpenTelemetry
        # cannot drop a series once observed.
        self.scheduler_pending_pods_by_zone = Gauge(
            "karpenter_scheduler_pending_pods_by_effective_zone_count",
            "Pending pods dimensioned by effective zone constraint, or the intersection of "
            "pod-level zone signals, volume topology (PVC zones), and topology constraints. "
            "Values: specific zone name (e.g., 'us-west-2a'), 'flexible' (multiple zones), "
            "or 'none' (no valid intersection).",
            ("controller", "zone"), registry=None,
        )
        # Set when the provisioner's solve starts and removed when it ends (Karpenter's
        # scheduler sets it for disruption's simulations too; karpy's what-if solves do
        # not yet, as they record no scheduling_duration either); its value is read when
        # /metrics is rendered (see ``Provisioner.schedule``).
        self.scheduler_unfinished_work = Gauge(
            "karpenter_scheduler_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by scheduling_duration_seconds.",
            ("controller", "scheduling_id"), registry=None,
        )
        # The pods left in a solve's queue when it ended (those it could not place), kept
        # until the controller's next solve replaces it: Karpenter's scheduler sets it on
        # each pass and deletes the controller's series when the next solve starts.
        self.scheduler_queue_depth = Gauge(
            "karpenter_scheduler_queue_depth",
            "The number of pods currently waiting to be scheduled.",
            ("controller", "scheduling_id"), registry=None,
        )
        self.consolidation_score = meter.create_histogram(
            "karpenter_consolidation_score",
            description="Score of balanced consolidation moves. Labeled by decision, "
            "NodePool, and policy.",
            explicit_bucket_boundaries_advisory=(0.1, 0.25, 0.33, 0.5, 1.0, 2.0, 5.0, 10.0),
        )
        self.consolidation_moves = meter.create_counter(
            "karpenter_consolidation_moves_total",
            description="Number of balanced consolidation moves. Labeled by decision, "
            "NodePool, and policy.",
        )
        self.cloudprovider_duration = meter.create_histogram(
            "karpenter_cloudprovider_duration_seconds", unit="s",
            description="Duration of cloud provider method calls. Labeled by the controller, "
            "method name and provider.",
            explicit_bucket_boundaries_advisory=PROMETHEUS_DEFAULT_BUCKETS,
        )
        self.cloudprovider_errors = meter.create_counter(
            "karpenter_cloudprovider_errors_total",
            description="Total number of errors returned from CloudProvider calls.",
        )
        self.node_termination_duration = Summary(
            "karpenter_nodes_termination_duration_seconds",
            "The time taken between a node's deletion request and the removal of its "
            "finalizer",
            ("nodepool",),
        )
        if registry is not None:
            registry.register(self.pods_startup_duration)
            registry.register(self.node_termination_duration)
            registry.register(self.scheduler_pending_pods_by_zone)
            registry.register(self.scheduler_unfinished_work)
            registry.register(self.scheduler_queue_depth)
        self.nodeclaim_termination_duration = meter.create_histogram(
            "karpenter_nodeclaims_termination_duration_seconds", unit="s",
            description="Duration of NodeClaim termination in seconds.",
            # prometheus.ExponentialBuckets(1, 2, 12): 1 .. 2048 s
            explicit_bucket_boundaries_advisory=tuple(float(2**i) for i in range(12)),
        )
        self.instance_termination_duration = meter.create_histogram(
            "karpenter_nodeclaims_instance_termination_duration_seconds", unit="s",
            description="Duration of CloudProvider Instance termination in seconds.",
            explicit_bucket_boundaries_advisory=(
                1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0),
        )
        self.pods_drained = meter.create_counter(
            "karpenter_pods_drained_total",
            description="The total number of pods drained during node termination by "
            "Karpenter, labeled by reason",
        )
        self.pods_eviction_requests = meter.create_counter(
            "karpenter_pods_eviction_requests_total",
            description="The total number of pod eviction requests made by Karpenter, "
            "labeled by response code",
        )
        # -- disruption (pkg/controllers/disruption/metrics.go) ------------------------
        self.disruption_evaluation_duration = meter.create_histogram(
            "karpenter_voluntary_disruption_decision_evaluation_duration_seconds", unit="s",
            description="Duration of the disruption decision evaluation process in seconds. "
            "Labeled by method and consolidation type.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.disruption_decisions = meter.create_counter(
            "karpenter_voluntary_disruption_decisions_total",
            description="Number of disruption decisions performed. Labeled by disruption "
            "decision, reason, and consolidation type.",
        )
        self.disruption_decisions_by_nodepool = meter.create_counter(
            "karpenter_voluntary_disruption_decisions_by_nodepool_total",
            description="Number of disruption decisions performed per NodePool. Labeled by "
            "nodepool, disruption decision, reason, and consolidation type.",
        )
        self.disruption_eligible_nodes = meter.create_gauge(
            "karpenter_voluntary_disruption_eligible_nodes",
            description="Number of nodes eligible for disruption by Karpenter. Labeled by "
            "disruption reason.",
        )
        self.disruption_consolidation_timeouts = meter.create_counter(
            "karpenter_voluntary_disruption_consolidation_timeouts_total",
            description="Number of times the Consolidation algorithm has reached a timeout. "
            "Labeled by consolidation type.",
        )
        self.disruption_failed_validations = meter.create_counter(
            "karpenter_voluntary_disruption_failed_validations_total",
            description="Number of candidates that were selected for disruption but failed "
            "validation. Labeled by consolidation type.",
        )
        self.disruption_queue_failures = meter.create_counter(
            "karpenter_voluntary_disruption_queue_failures_total",
            description="The number of times that an enqueued disruption decision failed. "
            "Labeled by disruption method.",
        )
        self.nodepool_allowed_disruptions = meter.create_gauge(
            "karpenter_nodepools_allowed_disruptions",
            description="The number of nodes for a given NodePool that can be concurrently "
            "disrupting at a point in time. Labeled by NodePool. Note that allowed "
            "disruptions can change very rapidly, as new nodes may be created and others "
            "may be deleted at any point.",
        )
        self.nodepool_nodes_consuming_budgets = meter.create_gauge(
            "karpenter_nodepools_nodes_consuming_budgets",
            description="The number of nodes for a given NodePool that are currently "
            "consuming disruption budgets (not ready or being deleted).",
        )
        self.pods_disruption_initiated = meter.create_counter(
            "karpenter_pods_disruption_initiated_total",
            description="The number of pods whose disruption Karpenter initiated, labeled "
            "by reason, nodepool and capacity type.",
        )
        self.cost_tracker_errors = meter.create_counter(
            "karpenter_nodepools_cost_tracker_errors_total",
            description="Number of errors encountered during cost tracking operations. "
            "Labeled by nodepool and nodeclaim.",
        )
        self.nodes_lifetime_duration = meter.create_histogram(
            "karpenter_nodes_lifetime_duration_seconds", unit="s",
            description="The lifetime duration of the nodes since creation.",
            explicit_bucket_boundaries_advisory=LIFETIME_BUCKETS,
        )
        self.nodeclaims_unhealthy_disrupted = meter.create_counter(
            "karpenter_nodeclaims_unhealthy_disrupted_total",
            description="Number of unhealthy nodeclaims disrupted in total by Karpenter. "
            "Labeled by condition on the node was disrupted, the owning nodepool, and the "
            "image ID.",
        )
