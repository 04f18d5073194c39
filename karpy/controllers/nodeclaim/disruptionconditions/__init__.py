"""The ``nodeclaim.disruption`` controller: the NodeClaim conditions disruption reads.

* ``Consolidatable`` (:mod:`.consolidatable`) — True once the NodeClaim is initialized
  and its NodePool's ``consolidateAfter`` has passed since pods last came or went;
* ``Drifted`` (:mod:`.drift`) — True, with the reason, once the NodeClaim no longer
  matches what its NodePool and NodeClass would launch now.

``controller`` runs both against the NodeClaim's NodePool and writes the status once.
(The package is not called ``disruption``: that is the disruption controller's.)
"""

from karpy.controllers.nodeclaim.disruptionconditions.consolidatable import Consolidatable
from karpy.controllers.nodeclaim.disruptionconditions.controller import DisruptionConditions
from karpy.controllers.nodeclaim.disruptionconditions.drift import (
    INSTANCE_TYPE_NOT_FOUND,
    NODEPOOL_DRIFTED,
    REQUIREMENTS_DRIFTED,
    Drift,
    requirements_drifted,
    static_drifted,
)

__all__ = [
    "INSTANCE_TYPE_NOT_FOUND",
    "NODEPOOL_DRIFTED",
    "REQUIREMENTS_DRIFTED",
    "Consolidatable",
    "DisruptionConditions",
    "Drift",
    "requirements_drifted",
    "static_drifted",
]
