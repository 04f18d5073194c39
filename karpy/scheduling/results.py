"""What the simulator decides: pods for existing nodes, NodeClaims to create, and why
the remaining pods fit nowhere."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.apis.labels import LABEL_INSTANCE_TYPE
from karpy.scheduling import resources as res
from karpy.scheduling.instancetype import InstanceType
from karpy.scheduling.pod import Pod
from karpy.scheduling.requirements import Requirements
from karpy.scheduling.reservations import ReservedOfferingError
from karpy.scheduling.taints import NodeTaint

__all__ = ["ExistingNodePlan", "NodeClaimPlan", "PodError", "Results"]


@dataclass(frozen=True, slots=True, eq=False)
class NodeClaimPlan:
    """A NodeClaim to create: its NodePool, the pods it is for, and the requirements
    narrowed to the instance types and offerings that fit them all.

    ``instance_types`` are ordered cheapest first (by the cheapest available offering
    compatible with ``requirements``), at most ``max_instance_types`` of them, chosen so
    that ``minValues`` still hold; ``requirements`` include an instance-type ``In`` over
    exactly these. ``requests`` are the pods' requests plus the DaemonSet overhead.
    """

    nodepool: str
    pods: tuple[Pod, ...]
    requirements: Requirements
    instance_types: tuple[InstanceType, ...]
    requests: Mapping[str, int]
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[NodeTaint, ...] = ()
    startup_taints: tuple[NodeTaint, ...] = ()
    hostname: str = ""
    narrowed: bool = False
    """The cost-improvement stage narrowed ``requirements`` (to one zone) so that the
    NodeClaim could take a pod moved onto it: it launches in fewer zones, and may list
    fewer instance types, than first fit would have given it for its pods."""
    min_values_relaxed: bool = False
    """``minValues`` of some requirement was lowered to what the instance types span
    (MIN_VALUES_POLICY=BestEffort); the NodeClaim says so in Karpenter's
    ``karpenter.sh/nodeclaim-min-values-relaxed`` annotation."""
    reservation_ids: tuple[str, ...] = ()
    """The capacity reservations the NodeClaim holds a slot of and is pinned to
    (capacity type ``reserved``); empty when it launches on-demand or spot."""
    dra_drivers: tuple[str, ...] = ()
    """The DRA drivers whose template devices its pods were allocated (sorted); the
    NodeClaim records them in ``karpenter.sh/requested-dra-drivers`` and is initialized
    only once each has published the node's ResourceSlices (Karpenter v1.14.1)."""

    @property
    def price(self) -> float:
        """The hourly price of the cheapest compatible offering (what a launch would
        most likely cost)."""
        for instance_type in self.instance_types:
            price = instance_type.cheapest_price(self.requirements)
            if price is not None:
                return price
        return 0.0

    @property
    def priced_by(self) -> str:
        """The NodeOverlay that set :attr:`price` (empty: the provider's price)."""
        best: tuple[float, str] | None = None
        for instance_type in self.instance_types:
            for offering in instance_type.offerings:
                if not offering.available:
                    continue
                if not self.requirements.overlaps(offering.requirements):
                    continue
                if best is None or offering.price < best[0]:
                    best = (offering.price, offering.overlay)
            if best is not None:
                return best[1]
        return ""

    @property
    def instance_type_names(self) -> list[str]:
        """The instance type names, cheapest first."""
        return [it.name for it in self.instance_types]

    def node_selector_requirements(self) -> list[dict[str, Any]]:
        """``spec.requirements`` for the NodeClaim: node-selector requirement dicts with
        ``minValues`` where set; the instance-type requirement lists the types cheapest
        first (the order a provider should try them in)."""
        out = []
        for requirement in self.requirements.requirements():
            dicts = requirement.to_dicts()
            # A plan without instance types (a static NodePool's) keeps the pool's own
            # instance-type requirement: the provider chooses, as in Karpenter.
            if (requirement.key == LABEL_INSTANCE_TYPE and requirement.operator == "In"
                    and self.instance_types):
                dicts[0]["values"] = self.instance_type_names
            out.extend(dicts)
        return out

    def resource_requests(self) -> dict[str, str]:
        """``spec.resources.requests`` as Kubernetes quantity strings."""
        return res.format_resource_list(self.requests)

    def __repr__(self) -> str:
        return (
            f"NodeClaimPlan({self.nodepool}, pods={len(self.pods)}, "
            f"types={self.instance_type_names[:3]}{'...' if len(self.instance_types) > 3 else ''})"
        )


@dataclass(frozen=True, slots=True, eq=False)
class ExistingNodePlan:
    """Pods the simulator placed on a node (or in-flight NodeClaim) that already exists."""

    node: str
    pods: tuple[Pod, ...]


@dataclass(frozen=True, slots=True)
class PodError:
    """Why a pod fits nowhere, in words a person can act on."""

    pod: Pod
    reason: str

    def __str__(self) -> str:
        return f"{self.pod.key}: {self.reason}"


@dataclass(frozen=True, slots=True, eq=False)
class Results:
    """The simulator's decision."""

    new_nodeclaims: tuple[NodeClaimPlan, ...] = ()
    existing_nodes: tuple[ExistingNodePlan, ...] = ()
    errors: tuple[PodError, ...] = ()
    reservations: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    """Per reservation ID: (slots the new NodeClaims take, slots that were free)."""
    pending_by_zone: Mapping[str, int] = field(default_factory=dict)
    """The unbound pods of the solve by the zone they were held to when it started: a
    zone name, ``flexible`` or ``none`` (see :mod:`karpy.scheduling.effectivezone`)."""

    @property
    def scheduled_pods(self) -> int:
        """How many pods were placed (on new or existing capacity)."""
        return sum(len(n.pods) for n in self.new_nodeclaims) + sum(
            len(n.pods) for n in self.existing_nodes
        )

    @property
    def narrowed_nodeclaims(self) -> int:
        """How many new NodeClaims the cost-improvement stage narrowed (see
        :attr:`NodeClaimPlan.narrowed`): launch flexibility traded for price."""
        return sum(1 for n in self.new_nodeclaims if n.narrowed)

    @property
    def price(self) -> float:
        """Total hourly price of the new NodeClaims."""
        return sum(n.price for n in self.new_nodeclaims)

    @property
    def deferred(self) -> tuple[PodError, ...]:
        """Pods that wait for reserved capacity to free up rather than fit nowhere
        (Karpenter's reserved offering errors); they are tried again next round."""
        return tuple(e for e in self.errors if isinstance(e.reason, ReservedOfferingError))

    def error_for(self, pod_key: str) -> str | None:
        """The reason pod ``namespace/name`` was not placed, or None."""
        for error in self.errors:
            if error.pod.key == pod_key:
                return error.reason
        return None

    def placements(self) -> dict[str, str]:
        """Pod key to where it goes: a node name, or ``"new:<n>"`` for the n-th new
        NodeClaim (handy in tests and logs)."""
        out: dict[str, str] = {}
        for index, claim in enumerate(self.new_nodeclaims):
            for pod in claim.pods:
                out[pod.key] = f"new:{index}"
        for node in self.existing_nodes:
            for pod in node.pods:
                out[pod.key] = node.node
        return out
