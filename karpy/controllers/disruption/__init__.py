"""Disruption: removing nodes that are empty, drifted or replaceable by cheaper ones,
the way Karpenter v1 does (docs/disruption.md).

* ``disruption`` (:class:`DisruptionController`) — every 10 s, the methods in
  Karpenter's order (Emptiness, StaticDrift, Drift, multi-node and single-node
  consolidation) look
  for a command within the NodePools' disruption budgets; consolidation asks the
  scheduling simulator what-if questions (``_whatif``), and may also split one node
  into several cheaper ones, or replace N nodes by M < N cheaper ones (N into M);
* ``disruption.queue`` (:class:`OrchestrationQueue`) — executes commands: taint and
  mark the candidates, launch replacements, wait until they are initialized, then delete
  the candidates (termination drains them), or roll back.

Before a command starts, the controller's :class:`Validator` re-checks it
(:class:`FreshStateValidator`, Karpenter's validation.go, after the validation delay);
a read-only view injects :data:`ACCEPT`.

Why a node is *not* disrupted comes from one place, :func:`node_blockers` /
:func:`pod_blockers`: the DisruptionBlocked events read it, and so does ``karpy explain
node`` (karpy/tools/explain).
"""

from __future__ import annotations

from karpy.controllers.deps import Deps
from karpy.controllers.disruption._budgets import Budgets, disruption_budgets
from karpy.controllers.disruption._candidates import (
    Candidate,
    PoolCatalogue,
    Snapshot,
    build_candidate,
    node_blockers,
    pod_blockers,
)
from karpy.controllers.disruption._command import Command, Decision
from karpy.controllers.disruption._controller import DisruptionController
from karpy.controllers.disruption._events import DisruptionEvents
from karpy.controllers.disruption._pdb import PdbLimits
from karpy.controllers.disruption._queue import OrchestrationQueue
from karpy.controllers.disruption._validation import (
    ACCEPT,
    FailureKind,
    FreshStateValidator,
    ValidationFailure,
    Validator,
)
from karpy.controllers.disruption._whatif import Simulation, WhatIf, consolidate
from karpy.controllers.provisioning import Provisioner
from karpy.runtime import kinds
from karpy.runtime.indexes import INDEX_NODE_NAME, index_by_node_name

__all__ = [
    "ACCEPT",
    "Budgets",
    "Candidate",
    "Command",
    "Decision",
    "DisruptionController",
    "FailureKind",
    "FreshStateValidator",
    "OrchestrationQueue",
    "PdbLimits",
    "PoolCatalogue",
    "Simulation",
    "Snapshot",
    "ValidationFailure",
    "Validator",
    "WhatIf",
    "build_candidate",
    "consolidate",
    "disruption_budgets",
    "node_blockers",
    "pod_blockers",
    "register",
]

_QUEUE_PERIOD = 1.0


def register(
    deps: Deps,
    provisioner: Provisioner,
    *,
    validator: Validator | None = None,
) -> DisruptionController:
    """Build the disruption controller and its orchestration queue; add both to
    ``deps.manager`` (and the cache informers they read: PDBs, pods by node).
    ``validator`` replaces the controller's own validation of its commands
    (:class:`FreshStateValidator`; a read-only view passes :data:`ACCEPT`)."""
    manager = deps.manager
    cache = manager.cache
    cache.informer(kinds.POD, indexers={INDEX_NODE_NAME: index_by_node_name})
    cache.informer(kinds.POD_DISRUPTION_BUDGET)
    events = DisruptionEvents(deps.recorder, deps.clock)
    queue = OrchestrationQueue(
        client=deps.client, cluster=deps.cluster, provisioner=provisioner, events=events,
        clock=deps.clock, settings=deps.settings, metrics=deps.metrics,
    )
    controller = DisruptionController(
        client=deps.client, cache=cache, cluster=deps.cluster, scheduling=deps.scheduling,
        cloud_provider=deps.cloud_provider, queue=queue, events=events, clock=deps.clock,
        settings=deps.settings, metrics=deps.metrics, validator=validator,
    )
    settings = deps.settings
    # A pass may search single- and multi-node consolidation to their bounds and wait
    # out two validations; the reconcile timeout must not cut that short.
    bound = (settings.single_node_consolidation_timeout
             + settings.multi_node_consolidation_timeout
             + 4 * settings.disruption_validation_delay + 120.0)
    manager.singleton(controller.name, controller, period=settings.disruption_poll_period,
                      reconcile_timeout=bound)
    manager.singleton(queue.name, queue, period=_QUEUE_PERIOD)
    return controller
