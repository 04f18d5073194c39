"""CapacityBuffer headroom (Karpenter's ``CapacityBuffer`` feature gate, v1.14):
``autoscaling.x-k8s.io/v1beta1`` CapacityBuffers, the API Cluster Autoscaler serves, kept
as capacity ready before pods ask for it.

* the ``capacitybuffer`` controller resolves each buffer's chunk (a PodTemplate, or the
  pod template of the Deployment, ReplicaSet or StatefulSet its scalableRef names),
  counts its chunks (replicas, percentage, limits) and writes its status
  (:mod:`._controller`, :mod:`._replicas`);
* its chunks become virtual pods (:mod:`._virtualpods`) that the provisioner schedules
  with the pending pods in every round, so capacity is bought for them and, as real
  pods take it, bought again; disruption's what-if must place them too, so
  consolidation and emptiness never remove the headroom.

``register`` does nothing unless the gate is on, as in Karpenter.
"""

from __future__ import annotations

from karpy.controllers.capacitybuffer._controller import (
    CAPACITY_BUFFER,
    POD_TEMPLATE,
    CapacityBufferController,
    buffers_using,
)
from karpy.controllers.capacitybuffer._replicas import (
    buffer_replicas,
    limit_replicas,
    percentage_replicas,
)
from karpy.controllers.capacitybuffer._virtualpods import (
    Placement,
    VirtualPods,
    build_virtual_pods,
)
from karpy.controllers.deps import Deps
from karpy.controllers.provisioning import Provisioner

__all__ = [
    "CAPACITY_BUFFER",
    "POD_TEMPLATE",
    "CapacityBufferController",
    "Placement",
    "VirtualPods",
    "buffer_replicas",
    "buffers_using",
    "build_virtual_pods",
    "limit_replicas",
    "percentage_replicas",
    "register",
]


def register(deps: Deps, provisioner: Provisioner) -> VirtualPods | None:
    """Add ``capacitybuffer`` and hand its virtual pods to the scheduling inputs (the
    provisioner and disruption schedule them) if the CapacityBuffer gate is on; the
    virtual pods, or None. ``provisioner`` is woken when a buffer changes."""
    if not deps.settings.feature_gates.capacity_buffer:
        return None
    virtual = VirtualPods()
    deps.scheduling.virtual_pods = virtual
    controller = CapacityBufferController(
        client=deps.client, virtual_pods=virtual, trigger=provisioner.trigger, clock=deps.clock
    )
    cache = deps.manager.cache
    (deps.manager.controller(controller.name)
        .for_(CAPACITY_BUFFER)
        .watches(POD_TEMPLATE, buffers_using(cache))
        .complete(controller, workers=2))
    return virtual
