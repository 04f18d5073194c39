"""``nodeoverlay.controller``: judges every NodeOverlay against every NodePool's
catalogue, puts the applicable ones in force and reports the others on their status.

Karpenter's controller of the same name: one reconcile evaluates all overlays at once
(their conflicts depend on each other), so every event, whichever overlay or NodePool it
is about, enqueues one key. The result replaces :class:`~karpy.state.OverlayStore` in
one step; the provisioner's instance-type cache applies it, so provisioning,
disruption's what-ifs, the cost metrics and ``karpy explain`` all see the overlaid
catalogue. Each overlay gets ``ValidationSucceeded`` (and Ready): False with reason
``Conflict`` when an overlay of the same weight already changes what it changes, or
``RuntimeValidation`` for what its schema cannot check. Only wired with the
``NodeOverlay`` feature gate on (the CRD may not be installed otherwise).
"""

from __future__ import annotations

from karpy.controllers.deps import Deps
from karpy.controllers.nodeoverlay._controller import NodeOverlayController, Verdict, judge
from karpy.controllers.provisioning.provisioner import Provisioner
from karpy.runtime import GENERATION_CHANGED, Object, Request
from karpy.state.kinds import NODE_OVERLAY, NODE_POOL

__all__ = ["NodeOverlayController", "Verdict", "judge", "register"]

#: The one key every event maps to: the reconcile judges all overlays together.
_ALL = Request("", "nodeoverlays")


def _all(_: Object) -> list[Request]:
    return [_ALL]


def register(deps: Deps, provisioner: Provisioner) -> NodeOverlayController | None:
    """Build the controller when the NodeOverlay gate is on (None otherwise)."""
    if not deps.settings.feature_gates.node_overlay:
        return None
    # Until the first judgement, NodePools offer no instance types (Karpenter's
    # UnevaluatedNodePoolError): nothing launches at a price an overlay would change.
    deps.overlays.required = True
    cache = deps.manager.cache
    cache.informer(NODE_OVERLAY)
    cache.informer(NODE_POOL)
    controller = NodeOverlayController(
        client=deps.client,
        index=cache,
        cluster=deps.cluster,
        store=deps.overlays,
        instance_types=deps.scheduling.instance_types,
        on_change=provisioner.trigger,
        clock=deps.clock,
    )
    builder = (deps.manager.controller(controller.name)
        .watches(NODE_OVERLAY, _all, predicate=GENERATION_CHANGED)
        .watches(NODE_POOL, _all, predicate=GENERATION_CHANGED))  # fmt: skip
    # A NodeClass turning ready changes what its NodePools' catalogues hold.
    for node_class in deps.cloud_provider.supported_node_classes():
        builder = builder.watches(node_class, _all)
    builder.complete(controller, workers=1)
    return controller
