"""Static capacity (Karpenter's ``StaticCapacity`` feature gate, alpha since v1.8): a
NodePool with ``spec.replicas`` keeps exactly that many nodes, whether or not pods need
them.

* ``static.provisioning`` creates the NodeClaims a static NodePool lacks, within
  ``limits.nodes``; ``static.deprovisioning`` deletes those it has beyond its replicas
  (:mod:`._provisioning`, :mod:`._deprovisioning`);
* the provisioner never plans pods onto a new node of a static NodePool, and disruption
  never consolidates one; a drifted node is replaced one for one, within the NodePool's
  disruption budgets (``StaticDrift`` in :mod:`karpy.controllers.disruption`).

``register`` adds the two controllers only when the gate is on, as Karpenter does.
"""

from __future__ import annotations

from collections.abc import Iterable

from karpy.apis.labels import LABEL_NODEPOOL
from karpy.controllers.deps import Deps
from karpy.controllers.provisioning import Provisioner
from karpy.controllers.static._count import ReplicaCount, count_replicas, node_limit
from karpy.controllers.static._deprovisioning import StaticDeprovisioning
from karpy.controllers.static._plan import static_plan
from karpy.controllers.static._provisioning import StaticProvisioning
from karpy.runtime import Object, Request
from karpy.state import NODE_CLAIM, NODE_POOL

__all__ = [
    "ReplicaCount",
    "StaticDeprovisioning",
    "StaticProvisioning",
    "count_replicas",
    "node_limit",
    "register",
    "static_plan",
]


def _nodepool_of(obj: Object) -> Iterable[Request]:
    pool = (obj["metadata"].get("labels") or {}).get(LABEL_NODEPOOL)
    return [Request("", pool)] if pool else []


def register(deps: Deps, provisioner: Provisioner) -> None:
    """Add ``static.provisioning`` and ``static.deprovisioning`` if StaticCapacity is on."""
    if not deps.settings.feature_gates.static_capacity:
        return
    manager = deps.manager
    provisioning = StaticProvisioning(cluster=deps.cluster, provisioner=provisioner)
    (manager.controller(provisioning.name)
        .for_(NODE_POOL)
        .watches(NODE_CLAIM, _nodepool_of)
        .complete(provisioning, workers=4))
    deprovisioning = StaticDeprovisioning(client=deps.client, cluster=deps.cluster)
    (manager.controller(deprovisioning.name)
        .for_(NODE_POOL)
        .watches(NODE_CLAIM, _nodepool_of)
        .complete(deprovisioning, workers=4))
