"""Small value types shared by the protocol, its errors and the controllers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, NewType

DriftReason = NewType("DriftReason", str)
"""Why a NodeClaim no longer matches what its NodePool/NodeClass would launch now
(Karpenter's reasons are CamelCase, e.g. ``"AMIDrift"``)."""


@dataclass(frozen=True, slots=True, order=True)
class OfferingKey:
    """Names one offering: an instance type in one zone with one capacity type.

    This is what :class:`~karpy.cloudprovider.InsufficientCapacityError` carries and what
    the core's unavailable-offerings cache is keyed by.
    """

    instance_type: str
    zone: str
    capacity_type: str

    def __str__(self) -> str:
        return f"{self.instance_type}/{self.zone}/{self.capacity_type}"


@dataclass(frozen=True, slots=True)
class RepairPolicy:
    """A Node condition that means "unhealthy"; the node is replaced once the condition
    has held for ``toleration`` (Karpenter's node auto-repair)."""

    condition_type: str
    condition_status: Literal["True", "False", "Unknown"]
    toleration: timedelta


@dataclass(frozen=True, slots=True)
class NodeClassKind:
    """A NodeClass custom resource a provider serves, e.g. ``karpenter.k8s.aws/v1
    EC2NodeClass``. ``plural`` is the resource name used in API paths."""

    group: str
    version: str
    kind: str
    plural: str

    @property
    def api_version(self) -> str:
        """``group/version``, as written in a manifest's ``apiVersion``."""
        return f"{self.group}/{self.version}"

    def __str__(self) -> str:
        return f"{self.kind}.{self.group}"
