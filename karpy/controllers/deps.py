"""What every autoscaler controller is built from: one value, assembled by the operator.

Each controller package exposes ``register(deps: Deps)`` that builds its controllers
from these dependencies and adds them to ``deps.manager``. One function builds the
value, :func:`karpy.operator.build_deps` (so the shared parts, the scheduling inputs
among them, are made once and made alike), for the operator, for the tools' read-only
view and for tests, which pass a fake clock, the fake provider and their own manager.
Nothing here is global.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from karpy.cloudprovider import CloudProvider, UnavailableOfferings
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.settings import Settings
from karpy.runtime import Client, Clock, EventRecorder, Manager
from karpy.state.cluster import Cluster
from karpy.state.overlays import OverlayStore
from karpy.state.registration_health import RegistrationHealth

if TYPE_CHECKING:  # the provisioning package imports this module
    from karpy.controllers.inputs.scheduling import SchedulingInputs

__all__ = ["Deps"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Deps:
    """The shared dependencies of the autoscaler's controllers."""

    manager: Manager
    client: Client
    """Writes go to the API server; reads of watched kinds come from the manager's cache."""
    cloud_provider: CloudProvider
    cluster: Cluster
    """The in-memory cluster model (nodes, NodeClaims, pods per node, nominations)."""
    unavailable_offerings: UnavailableOfferings
    recorder: EventRecorder
    clock: Clock
    settings: Settings
    metrics: KarpenterMetrics
    scheduling: SchedulingInputs
    """What every scheduling simulation starts from (instance types per NodePool,
    NodePool templates, pending and moving pods, simulator options), built once and
    read by provisioning, disruption, the cost metrics and the nodeoverlay controller;
    its instance types apply :attr:`overlays`."""
    overlays: OverlayStore
    """The NodeOverlays in force (kept by the nodeoverlay controller; empty with the
    NodeOverlay gate off): the very store :attr:`scheduling` applies and the provider's
    ``create`` was given, so it has no default (``operator.build_deps`` passes it)."""
    registration_health: RegistrationHealth = field(default_factory=RegistrationHealth)
    """Recent NodeClaim registrations per NodePool (NodeRegistrationHealthy), shared by
    the NodeClaim lifecycle and nodepool.registrationhealth."""
