"""The scheduling simulator: pure, synchronous and I/O-free. Requirements algebra,
resources, taints, topology, affinity and the bin-packing that decides which pods go on
existing capacity and which new NodeClaims to create.

Inputs are plain values built once from API objects (:meth:`Pod.from_dict`,
:meth:`ExistingNode.from_node_dict`, :meth:`NodePoolTemplate.from_nodepool_dict`);
outputs are :class:`Results`. See docs/scheduling.md.

This package's ``__all__`` (with the ``resources`` module) is the surface providers and
plugins build on; its submodules are not (tests/scheduling/test_api.py checks that
the providers and examples import nothing else of it).
"""

from karpy.scheduling import resources
from karpy.scheduling.devices import Device, ResourceSliceTemplate, slice_from_dict
from karpy.scheduling.instancetype import InstanceType, Offering, Overhead
from karpy.scheduling.lowerbound import CostFloor, cost_floor
from karpy.scheduling.node import ExistingNode
from karpy.scheduling.nodepool import NodePoolTemplate, SharedLimit
from karpy.scheduling.pod import AffinityTerm, HostPort, Pod, SpreadConstraint
from karpy.scheduling.requirements import (
    DOES_NOT_EXIST,
    EXISTS,
    GT,
    GTE,
    IN,
    LT,
    LTE,
    NOT_IN,
    InvalidRequirement,
    Requirement,
    Requirements,
)
from karpy.scheduling.reservations import (
    ReservationManager,
    ReservedOfferingError,
    held_in_flight,
    reservation_label_keys,
)
from karpy.scheduling.results import ExistingNodePlan, NodeClaimPlan, PodError, Results
from karpy.scheduling.selectors import LabelMatcher
from karpy.scheduling.simulator import SchedulerOptions, Simulator, solve
from karpy.scheduling.taints import NodeTaint, Toleration

__all__ = [
    "DOES_NOT_EXIST",
    "EXISTS",
    "GT",
    "GTE",
    "IN",
    "LT",
    "LTE",
    "NOT_IN",
    "AffinityTerm",
    "CostFloor",
    "Device",
    "ExistingNode",
    "ExistingNodePlan",
    "HostPort",
    "InstanceType",
    "InvalidRequirement",
    "LabelMatcher",
    "NodeClaimPlan",
    "NodePoolTemplate",
    "NodeTaint",
    "Offering",
    "Overhead",
    "Pod",
    "PodError",
    "Requirement",
    "Requirements",
    "ReservationManager",
    "ReservedOfferingError",
    "ResourceSliceTemplate",
    "Results",
    "SchedulerOptions",
    "SharedLimit",
    "Simulator",
    "SpreadConstraint",
    "Toleration",
    "cost_floor",
    "held_in_flight",
    "reservation_label_keys",
    "resources",
    "slice_from_dict",
    "solve",
]
