"""The autoscaler's settings: one frozen value passed explicitly to every controller.

Names and defaults follow Karpenter's settings (BATCH_IDLE_DURATION, BATCH_MAX_DURATION,
CLUSTER_NAME, ...). Durations are seconds. The lifecycle timeouts that Karpenter
hard-codes (launch 5 min, registration 15 min) are settings here so tests can shorten them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Final, Literal

from karpy.apis.strconv import parse_go_bool
from karpy.scheduling.defaultspread import SchedulerConfig
from karpy.scheduling.simulator import IMPROVEMENT_BUDGET

__all__ = ["UNIMPLEMENTED_GATES", "FeatureGates", "Settings"]

#: Gates karpy accepts under Karpenter's names but whose feature it does not have yet:
#: turned on, each is named once at start-up (a warning) and does nothing, so a
#: Karpenter v1.15 values file still starts karpy (docs/operating.md lists them).
#: Karpenter v1.15.0 checked: pkg/operator/options/options.go.
UNIMPLEMENTED_GATES: Final = {
    "TerminateFirstDrift": "drift always launches the replacement first (a drifted node "
    "whose replacement cannot launch stays until it can)",
    "TerminateFirstRepair": "repair always launches the replacement first",
    "PodDeletionCostManagement": "karpy writes no controller.kubernetes.io/pod-deletion-cost "
    "annotations",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class FeatureGates:
    """Karpenter's feature gates (``FEATURE_GATES="SpotToSpotConsolidation=true,..."``),
    with Karpenter's defaults."""

    # Every gate Karpenter v1.15.0 knows, in the order of its default FEATURE_GATES string
    # (pkg/operator/options KarpenterFeatureGates), so that string is accepted unchanged.
    node_repair: bool = False
    """Replace nodes whose conditions match the provider's repair policies."""
    reserved_capacity: bool = True
    """Launch into capacity reservations (offerings of capacity type ``reserved``),
    one NodeClaim per slot (docs/scheduling.md, Reserved capacity)."""
    spot_to_spot_consolidation: bool = False
    """Consolidate a spot node into a cheaper spot node (needs 15 cheaper types)."""
    node_overlay: bool = False
    static_capacity: bool = False
    """NodePools with ``spec.replicas`` keep exactly that many nodes (Karpenter v1.8)."""
    capacity_buffer: bool = False
    """Headroom from ``autoscaling.x-k8s.io`` CapacityBuffers (Karpenter v1.14)."""
    terminate_first_drift: bool = False
    """Karpenter v1.15: drift may delete a node before its replacement is ready where the
    replacement cannot launch first. Not implemented (:data:`UNIMPLEMENTED_GATES`)."""
    terminate_first_repair: bool = False
    """Karpenter v1.15: the same for repair. Not implemented."""
    pod_deletion_cost_management: bool = False
    """Karpenter v1.15: write ``controller.kubernetes.io/pod-deletion-cost`` from the
    disruption ranking. Not implemented."""

    @classmethod
    def parse(cls, text: str) -> FeatureGates:
        """Parse Karpenter's ``Name=true,Other=false`` form as Karpenter does
        (component-base's ``MapStringBool.Set``, k8s.io/component-base v0.34): empty
        items are skipped, each other item must be ``NAME=BOOL`` ("malformed pair"
        otherwise, so ``NodeRepair`` alone is an error, not true), the value is read by
        ``strconv.ParseBool`` (true, false, 1, 0, t, f, TRUE, True, ...).

        Raises ValueError naming the gate for an unknown name or a value that is not a
        boolean, so a typo fails at start-up instead of being ignored (Karpenter
        ignores an unknown name; karpy refuses it).
        """
        known = {_camel(f.name): f.name for f in fields(cls)}
        values: dict[str, bool] = {}
        for item in text.split(","):
            if not item:
                continue
            name, sep, value = item.partition("=")
            name = name.strip()
            if not sep:
                raise ValueError(f"malformed pair {item.strip()!r}, expect NAME=BOOL")
            attr = known.get(name)
            if attr is None:
                raise ValueError(
                    f"unknown feature gate {name!r}; known: {', '.join(sorted(known))}"
                )
            try:
                values[attr] = parse_go_bool(value.strip())
            except ValueError:
                raise ValueError(
                    f"feature gate {name}: {value.strip()!r} is not true or false"
                ) from None
        return cls(**values)

    def unimplemented_on(self) -> tuple[str, ...]:
        """The gates turned on whose feature karpy does not have (Karpenter's names)."""
        return tuple(n for n, on in self.as_mapping().items() if on and n in UNIMPLEMENTED_GATES)

    def as_mapping(self) -> Mapping[str, bool]:
        """The gates by their Karpenter names (``ReservedCapacity``), as providers see them
        (:attr:`karpy.cloudprovider.ProviderContext.feature_gates`)."""
        return {_camel(f.name): getattr(self, f.name) for f in fields(self)}


def _camel(snake: str) -> str:
    return "".join(part.capitalize() for part in snake.split("_"))


@dataclass(frozen=True, kw_only=True, slots=True)
class Settings:
    """Everything the controllers read from configuration."""

    cluster_name: str = ""
    batch_idle_duration: float = 1.0
    """The provisioning batch closes after this long without a new pending pod."""
    batch_max_duration: float = 10.0
    """...or after this long in all."""
    launch_ttl: float = 300.0
    """A NodeClaim not launched within this long is deleted (liveness)."""
    registration_ttl: float = 900.0
    """A launched NodeClaim whose Node has not registered within this long is deleted."""
    insufficient_capacity_ttl: float = 180.0
    """How long an offering that failed with insufficient capacity stays unavailable."""
    garbage_collection_grace: float = 30.0
    """A cloud instance with no NodeClaim is deleted once it is older than this."""
    garbage_collection_period: float = 120.0
    """How often the garbage collector lists the provider's instances."""
    eviction_retry: float = 5.0
    """Seconds before retrying an eviction that a PodDisruptionBudget refused."""
    pod_nomination_ttl: float = 20.0
    """How long a pod nominated to an in-flight NodeClaim is not provisioned again."""
    feature_gates: FeatureGates = field(default_factory=FeatureGates)
    scheduler_config: SchedulerConfig = field(default_factory=SchedulerConfig)
    """SCHEDULER_CONFIG: kube-scheduler's default topology spread constraints per
    scheduler, given to pending pods without their own (Karpenter v1.15.0)."""
    legacy_node_repair: bool = False
    """LEGACY_NODE_REPAIR (Karpenter v1.15): with NodeRepair on, run v1.14's node repair
    controller instead of repair as a disruption method (docs/disruption.md, Repair)."""
    disruption_poll_period: float = 10.0
    """How often the disruption controller looks for nodes to remove (Karpenter: 10 s)."""
    disruption_validation_delay: float = 15.0
    """How long an emptiness or consolidation command waits before it is re-checked
    and executed (Karpenter's commandValidationDelay)."""
    disruption_replacement_timeout: float = 600.0
    """A disruption command whose replacements are not initialized within this long is
    rolled back (Karpenter's minimum retry duration)."""
    multi_node_consolidation_timeout: float = 60.0
    """Time bound of one multi-node consolidation search."""
    single_node_consolidation_timeout: float = 180.0
    """Time bound of one single-node consolidation pass."""
    split_consolidation: bool = True
    """Let single-node consolidation replace one node by several cheaper ones (karpy)."""
    preference_policy: Literal["Respect", "Ignore"] = "Respect"
    """PREFERENCE_POLICY: Respect tries preferred affinities and ScheduleAnyway spreads
    and relaxes them when a pod fits nowhere; Ignore drops them up front."""
    min_values_policy: Literal["Strict", "BestEffort"] = "Strict"
    """MIN_VALUES_POLICY: Strict refuses a NodeClaim whose instance types do not span a
    requirement's minValues; BestEffort launches it with minValues lowered to what they
    span and annotates it ``karpenter.sh/nodeclaim-min-values-relaxed: "true"``."""
    ignore_dra_requests: bool = True
    """IGNORE_DRA_REQUESTS: pods with Dynamic Resource Allocation claims get a
    FailedScheduling event and no capacity (Karpenter's default); false: their claims
    are resolved and allocated (:mod:`karpy.scheduling.deviceallocation`)."""
    disable_cluster_state_observability: bool = False
    """DISABLE_CLUSTER_STATE_OBSERVABILITY: no per-pod, per-node and per-NodePool state
    gauges and no ``operator_*`` status metrics (Karpenter's "cluster state metrics and
    events"), for clusters where their series cost more than they tell."""
    multi_node_split_consolidation: bool = True
    """Let multi-node consolidation replace N nodes by M < N cheaper ones, not only by
    one (karpy; off: Karpenter's at-most-one replacement)."""
    improvement_budget: int = IMPROVEMENT_BUDGET
    """Evaluations per pod the scheduler's cost-improvement stage may spend after first
    fit (karpy; ``SchedulerOptions.improvement_budget``); 0 turns the stage off."""
