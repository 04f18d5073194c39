"""Provisioning: pending pods in, NodeClaims out.

:class:`Provisioner` (the ``provisioner`` singleton) batches pods that need capacity,
runs the scheduling simulator over existing, in-flight and new capacity, and creates the
NodeClaims it plans; :class:`ProvisionerTrigger` wakes it from pod and node events.
:func:`register` adds both to the manager. What a round schedules (instance types,
NodePool templates, pending and moving pods, simulator options) is one
:class:`~karpy.controllers.inputs.SchedulingInputs` (karpy/controllers/inputs), carried
in ``Deps`` and shared with disruption, the metrics and the tools.
"""

from __future__ import annotations

from karpy.controllers.deps import Deps
from karpy.controllers.provisioning.batcher import Batcher
from karpy.controllers.provisioning.provisioner import PROVISIONED_REASON, Provisioner
from karpy.controllers.provisioning.trigger import ProvisionerTrigger
from karpy.runtime import kinds
from karpy.state import NODE_POOL

__all__ = [
    "PROVISIONED_REASON",
    "Batcher",
    "Provisioner",
    "ProvisionerTrigger",
    "register",
]

# The singleton's reconcile returns at least every second (the batcher's wait), so its
# period only matters if that ever changes.
_PERIOD = 1.0


def register(deps: Deps) -> Provisioner:
    """Build the provisioner and its trigger and add them to ``deps.manager``."""
    provisioner = Provisioner(client=deps.client, inputs=deps.scheduling, clock=deps.clock)
    deps.manager.singleton(provisioner.name, provisioner, period=_PERIOD)
    deps.cluster.add_release_handler(provisioner.release)
    cache = deps.manager.cache
    deps.manager.add(
        ProvisionerTrigger(
            provisioner, deps.cluster,
            pods=cache.informer(kinds.POD), nodes=cache.informer(kinds.NODE),
            nodepools=cache.informer(NODE_POOL),
        )
    )
    return provisioner
