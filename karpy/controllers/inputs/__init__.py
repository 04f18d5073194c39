"""What the controllers that decide on capacity share: the scheduling inputs.

Provisioning, disruption, the cost metrics, the nodeoverlay controller, the tools'
view and ``karpy top`` all start from the same things, so they live here, beside the
controllers rather than in one of them:

* :class:`SchedulingInputs` (``scheduling``) — each NodePool's instance types, the
  NodePool templates, the pending, moving and virtual pods and the simulator's options,
  built once by the operator and carried in ``Deps``;
* :class:`InstanceTypeCache` (``instancetypes``) — the instance types per NodePool
  generation, NodeOverlays applied and offerings that ran out masked;
* :class:`VirtualPodSource` (``virtualpods``) — what a source of virtual pods (the
  CapacityBuffers') offers the inputs;
* :class:`PodEvents` and :class:`NodePoolEvents` (``events``) — the Events recorded
  while the inputs are built (FailedScheduling, Nominated, NoCompatibleInstanceTypes).
"""

from __future__ import annotations

from karpy.controllers.inputs.events import NodePoolEvents, PodEvents
from karpy.controllers.inputs.instancetypes import InstanceTypeCache
from karpy.controllers.inputs.scheduling import SchedulingInputs
from karpy.controllers.inputs.virtualpods import VirtualPodSource

__all__ = [
    "InstanceTypeCache",
    "NodePoolEvents",
    "PodEvents",
    "SchedulingInputs",
    "VirtualPodSource",
]
