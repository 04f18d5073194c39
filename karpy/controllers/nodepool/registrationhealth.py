"""``nodepool.registrationhealth``: the NodePool's ``NodeRegistrationHealthy`` condition.

Karpenter's ``nodepool/registrationhealth`` and the two hooks of its NodeClaim lifecycle
(``updateNodePoolRegistrationHealth`` in registration and liveness):

* when a NodeClaim of the NodePool registers, the outcome is recorded and, if the
  record then reads healthy, the condition turns True;
* when one is deleted for not launching or not registering in time, the outcome is
  recorded and, if the record then reads unhealthy (two failures among the last four),
  the condition turns False — reason ``RegistrationFailed``, "Failed to register node",
  when it had launched; otherwise its Launched condition's reason and message (the
  cloud's error);
* this controller sets the condition Unknown and forgets the record when the NodePool's
  spec (its generation) or its NodeClass's generation changed since the condition was
  judged — a fixed NodeClass gets a fresh start — keeping
  ``status.nodeClassObservedGeneration``; after a restart it re-seeds the record from
  the condition as stored.

Only NodeClaims owned by the NodePool (ownerReference with its uid) count, as upstream.
The condition is informational: it is not part of the NodePool's Ready.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy.apis import NodeClaim, NodePool
from karpy.apis.labels import LABEL_NODEPOOL
from karpy.apis.v1 import CONDITION_LAUNCHED, CONDITION_NODE_REGISTRATION_HEALTHY
from karpy.cloudprovider import CloudProvider
from karpy.controllers.nodepool._objects import get_managed, parse_nodepool
from karpy.runtime import Client, Clock, Request, Result, errors
from karpy.state.kinds import NODE_POOL
from karpy.state.registration_health import HealthStatus, RegistrationHealth

__all__ = ["NodePoolRegistrationHealth", "record_registration"]


def _now(clock: Clock) -> Any:
    return lambda: clock.now().replace(microsecond=0)


async def _patch(client: Client, stored: Mapping[str, Any], nodepool: NodePool,
                 extra: Mapping[str, Any] | None = None) -> None:
    meta = stored["metadata"]
    await client.patch_status(NODE_POOL, meta["name"], {
        "metadata": {"resourceVersion": meta.get("resourceVersion")},
        "status": {"conditions": [c.to_dict() for c in nodepool.status.conditions],
                   **(extra or {})},
    })


async def record_registration(
    client: Client, health: RegistrationHealth, clock: Clock, nodeclaim: NodeClaim,
    *, registered: bool,
) -> None:
    """Record a NodeClaim's registration outcome against its NodePool and flip the
    NodePool's condition when the verdict calls for it (see the module docs). A NodePool
    that changed meanwhile is read again (three tries); other errors propagate."""
    for attempt in range(3):
        try:
            # From the cache first (a thousand registrations are a thousand reads); after
            # a conflict, live: the retry must see the NodePool as it is now.
            await _record(client, health, clock, nodeclaim, registered=registered,
                          live=attempt > 0)
            return
        except errors.Conflict:
            if attempt == 2:
                raise


async def _record(
    client: Client, health: RegistrationHealth, clock: Clock, nodeclaim: NodeClaim,
    *, registered: bool, live: bool,
) -> None:
    pool_name = nodeclaim.metadata.labels.get(LABEL_NODEPOOL, "")
    if not pool_name:
        return
    try:
        stored = await client.get(NODE_POOL, pool_name, live=live)
    except errors.NotFound:
        return
    uid = str(stored["metadata"].get("uid") or "")
    if not any(ref.kind == "NodePool" and ref.uid == uid
               for ref in nodeclaim.metadata.owner_references):
        return
    nodepool, _ = parse_nodepool(stored)
    conditions = nodepool.status_conditions(now=_now(clock))
    current = conditions.get(CONDITION_NODE_REGISTRATION_HEALTHY)
    verdict = health.dry_run(uid, registered)
    changed = False
    if registered and verdict is HealthStatus.HEALTHY:
        changed = bool(conditions.set_true(CONDITION_NODE_REGISTRATION_HEALTHY))
    elif not registered and verdict is HealthStatus.UNHEALTHY and (
            current is None or current.status != "False"):
        launched = next((c for c in nodeclaim.status.conditions
                         if c.type == CONDITION_LAUNCHED), None)
        if launched is not None and launched.status == "True":
            conditions.set_false(CONDITION_NODE_REGISTRATION_HEALTHY, "RegistrationFailed",
                                 "Failed to register node")
        else:
            conditions.set_false(
                CONDITION_NODE_REGISTRATION_HEALTHY,
                (launched.reason if launched is not None else "") or "LaunchFailed",
                launched.message if launched is not None else "",
            )
        changed = True
    if changed:
        try:
            await _patch(client, stored, nodepool)
        except errors.NotFound:
            return
    health.update(uid, registered)


class NodePoolRegistrationHealth:
    """The ``nodepool.registrationhealth`` reconciler (see the module docs)."""

    name = "nodepool.registrationhealth"

    def __init__(self, *, client: Client, cloud_provider: CloudProvider, clock: Clock,
                 health: RegistrationHealth) -> None:
        self._client = client
        self._provider = cloud_provider
        self._clock = clock
        self._health = health

    async def reconcile(self, request: Request) -> Result:
        """Re-seed the record after a restart; reset it when the NodePool or its
        NodeClass changed."""
        found = await get_managed(self._client, self._provider, request.name)
        if found is None:
            return Result()
        stored, (kind, class_name) = found
        try:
            node_class = await self._client.get(kind, class_name)
        except errors.NotFound:
            return Result()
        class_generation = int((node_class.get("metadata") or {}).get("generation") or 0)
        nodepool, _ = parse_nodepool(stored)
        uid = str(stored["metadata"].get("uid") or "")
        conditions = nodepool.status_conditions(now=_now(self._clock))
        condition = conditions.get(CONDITION_NODE_REGISTRATION_HEALTHY)
        if self._health.status(uid) is HealthStatus.UNKNOWN and condition is not None:
            if condition.status == "True":
                self._health.set_status(uid, HealthStatus.HEALTHY)
            elif condition.status == "False":
                self._health.set_status(uid, HealthStatus.UNHEALTHY)
        observed = (stored.get("status") or {}).get("nodeClassObservedGeneration")
        generation = int(stored["metadata"].get("generation") or 0)
        if (condition is None or observed != class_generation
                or condition.observed_generation != generation):
            conditions.set_unknown(CONDITION_NODE_REGISTRATION_HEALTHY)
            self._health.set_status(uid, HealthStatus.UNKNOWN)
        before = (stored.get("status") or {}).get("conditions") or []
        after = [c.to_dict() for c in nodepool.status.conditions]
        if observed == class_generation and before == after:
            return Result()
        try:
            await _patch(self._client, stored, nodepool,
                         {"nodeClassObservedGeneration": class_generation})
        except errors.NotFound:
            return Result()
        except errors.Conflict:
            return Result(requeue=True)
        return Result()
