"""The controllers the AWS provider contributes through ``register_controllers``, built
on karpy.runtime only:

* ``nodeclass`` — EC2NodeClass status and finalizer (:mod:`karpy_aws._nodeclass_status`);
* ``nodeclass.hash`` — Karpenter AWS's ``karpenter.k8s.aws/ec2nodeclass-hash`` (version
  ``v5``) on each EC2NodeClass, NodeClaims re-stamped on a version change
  (:mod:`karpy.cloudprovider.nodeclass_hash`, :mod:`karpy_aws._hash`);
* ``launchtemplate.garbagecollection`` — every 5 minutes, deletes this cluster's launch
  templates no launch has used for 10 minutes (Karpenter AWS's template cache TTL);
* ``interruption`` — the SQS interruption queue (:mod:`karpy_aws._interruption`), only
  when the ``interruptionQueue`` setting names one;
* ``interruption.instancestatus`` — every minute, DescribeInstanceStatus health checks
  (:mod:`karpy_aws._instancestatus`), always, as in Karpenter;
* ``capacityreservation.expiration`` — every minute, drains the nodes of capacity blocks
  about to end (:mod:`karpy_aws._reservation_expiration`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Protocol

from opentelemetry.metrics import Meter

from karpy.cloudprovider.nodeclass_hash import NodeClassHash, NodeClassHashSpec
from karpy.runtime import Manager, Result
from karpy_aws._hash import HASH_VERSION, node_class_hash
from karpy_aws._instancestatus import INSTANCE_STATUS_INTERVAL, InstanceStatusController
from karpy_aws._interruption import InterruptionController
from karpy_aws._interruption_handler import InterruptionParts
from karpy_aws._kinds import EC2_NODE_CLASS
from karpy_aws._launchtemplates import LaunchTemplates
from karpy_aws._nodeclass_status import NodeClassParts, NodeClassStatusController
from karpy_aws._reservation_expiration import (
    EXPIRATION_INTERVAL,
    ReservationExpirationController,
)
from karpy_aws.apis import labels as aws
from karpy_aws.apis.ec2nodeclass import EC2NodeClass

__all__ = ["ControllerParts", "LaunchTemplateGC", "nodeclass_hash_spec", "register_controllers"]

GC_PERIOD: Final = 300.0
UNUSED_FOR: Final = 600.0


class LaunchTemplateGC:
    """Deletes launch templates nobody launched with for ``unused_for`` seconds."""

    def __init__(self, templates: LaunchTemplates, *, unused_for: float = UNUSED_FOR) -> None:
        self._templates = templates
        self._unused_for = unused_for

    async def reconcile(self) -> Result:
        await self._templates.garbage_collect(unused_for=self._unused_for)
        return Result(requeue_after=GC_PERIOD)


class ControllerParts(NodeClassParts, InterruptionParts, Protocol):
    """What the provider's controllers need of it (the provider is one; they take its
    parts, not its class, so no controller module imports the provider's)."""

    def instrument(self, meter: Meter) -> None:
        """Record Karpenter AWS's own metrics with ``meter``."""
        ...


def nodeclass_hash_spec(ca_bundle: str) -> NodeClassHashSpec:
    """The ``nodeclass.hash`` controller's EC2NodeClass side: Karpenter AWS's hash with the
    CA bundle it is computed with (the provider's ``cluster.hash_ca_bundle``)."""

    def hash_of(stored: Mapping[str, Any]) -> str | None:
        try:
            node_class = EC2NodeClass.from_dict(stored)
        except ValueError:
            return None  # the nodeclass controller reports what is wrong with it
        return node_class_hash(node_class, ca_bundle)

    return NodeClassHashSpec(
        kind=EC2_NODE_CLASS,
        hash_annotation=aws.ANNOTATION_EC2NODECLASS_HASH,
        version_annotation=aws.ANNOTATION_EC2NODECLASS_HASH_VERSION,
        version=HASH_VERSION,
        hash_of=hash_of,
    )


def register_controllers(provider: ControllerParts, manager: Manager) -> None:
    """Add the provider's controllers to ``manager`` (see the module docstring)."""
    provider.instrument(manager.meter("karpenter"))
    status = NodeClassStatusController(
        provider, manager.client, manager.event_recorder("karpenter")
    )
    manager.controller(status.name).for_(EC2_NODE_CLASS).complete(status)
    hashes = NodeClassHash(nodeclass_hash_spec(provider.cluster.hash_ca_bundle), manager.client)
    manager.controller(hashes.name).for_(EC2_NODE_CLASS).complete(hashes)
    manager.singleton(
        "launchtemplate.garbagecollection",
        LaunchTemplateGC(provider.launch_templates),
        period=GC_PERIOD,
    )
    instance_status = InstanceStatusController(
        provider,
        manager.client,
        manager.event_recorder("karpenter"),
        meter=manager.meter("karpenter"),
    )
    manager.singleton(instance_status.name, instance_status, period=INSTANCE_STATUS_INTERVAL)
    expiration = ReservationExpirationController(provider.reservations, manager.client)
    manager.singleton(expiration.name, expiration, period=EXPIRATION_INTERVAL)
    if provider.settings.interruption_queue:
        manager.add(
            InterruptionController(
                provider,
                manager.client,
                manager.event_recorder("karpenter"),
                meter=manager.meter("karpenter"),
            ),
            name="interruption",
        )
