"""``node.health``: a node unhealthy for longer than its provider tolerates is replaced.

Karpenter's ``node/health`` controller. ``CloudProvider.repair_policies()`` name node
conditions that mean "broken" (kwok: ``Ready`` False or Unknown) and how long each may
last. Once one has held for its toleration (counted from the condition's
``lastTransitionTime``), the node's NodeClaim is annotated
``karpenter.sh/nodeclaim-termination-timestamp: <now>`` — its terminationGracePeriod is
over already, so termination removes the pods at once, bypassing PodDisruptionBudgets
and ``karpenter.sh/do-not-disrupt`` — and deleted; the provisioner then launches a
replacement for the pods that go pending. Budgets do not apply: repair is not voluntary
disruption.

One safeguard: if more than :data:`ALLOWED_UNHEALTHY_PERCENT` of the NodePool's nodes
(rounded up, as PDB percentages are) match a repair policy, whatever for how long, the
trouble is likely not the nodes' own — nothing is repaired, a ``NodeRepairBlocked``
warning is recorded on the node (at most every 15 minutes), and the node is looked at
again in 5 minutes. A NodeClaim without a NodePool is measured against the whole cluster.

Logged: "annotated nodeclaim", "deleting unhealthy node"; counted:
``karpenter_nodeclaims_disrupted_total{reason="unhealthy"}``,
``karpenter_pods_disruption_initiated_total{reason="unhealthy"}`` and
``karpenter_nodeclaims_unhealthy_disrupted_total{condition, nodepool, capacity_type,
image_id, termination_mode}``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final

from karpy.apis.annotations import ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP
from karpy.apis.labels import LABEL_NODEPOOL
from karpy.apis.pretty import to_snake_case
from karpy.cloudprovider import CloudProvider, RepairPolicy
from karpy.controllers.disrupted import disrupted_labels, grace_period_of
from karpy.controllers.indexes import Index, nodeclaims_for_provider_id
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.reschedulable import reschedulable_pods
from karpy.runtime import (
    Client,
    Clock,
    EventRecorder,
    Object,
    Predicate,
    Request,
    Result,
    errors,
    format_time,
    kinds,
    logging_context,
    parse_time,
)
from karpy.state.kinds import NODE_CLAIM

__all__ = [
    "ALLOWED_UNHEALTHY_PERCENT",
    "BLOCKED_RECHECK",
    "CONDITIONS_CHANGED",
    "REASON_NODE_REPAIR_BLOCKED",
    "UNHEALTHY_REASON",
    "NodeHealth",
    "allowed_unhealthy",
    "unhealthy_condition",
]

log = logging.getLogger("controller")

ALLOWED_UNHEALTHY_PERCENT: Final = 20
"""Up to this share of a NodePool's nodes may be unhealthy and still be repaired."""
BLOCKED_RECHECK: Final = 300.0
"""Seconds before a node whose repair was blocked is looked at again."""
REASON_NODE_REPAIR_BLOCKED: Final = "NodeRepairBlocked"
UNHEALTHY_REASON: Final = "unhealthy"
"""The ``reason`` label of ``karpenter_nodeclaims_disrupted_total``."""
_EVENT_DEDUPE: Final = timedelta(minutes=15)


def _conditions(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((node.get("status") or {}).get("conditions") or ())


def _conditions_changed(old: Object, new: Object) -> bool:
    before = _conditions(old)
    after = {c.get("type"): c for c in _conditions(new)}
    if len(before) != len(after):
        return True
    for cond in before:
        now = after.get(cond.get("type"))
        if now is None or (now.get("status"), now.get("lastTransitionTime")) != (
                cond.get("status"), cond.get("lastTransitionTime")):
            return True
    return False


CONDITIONS_CHANGED: Final = Predicate(update=_conditions_changed)
"""Node updates that matter: a condition appeared, went, or changed status or
transition time (heartbeats, which only move lastHeartbeatTime, do not)."""


def unhealthy_condition(
    node: Mapping[str, Any], policies: Sequence[RepairPolicy]
) -> tuple[Mapping[str, Any], datetime] | None:
    """The node condition matching a repair policy whose toleration ends first, with
    that moment; None when no policy matches."""
    found: tuple[Mapping[str, Any], datetime] | None = None
    by_type = {c.get("type"): c for c in _conditions(node)}
    for policy in policies:
        cond = by_type.get(policy.condition_type)
        if cond is None or cond.get("status") != policy.condition_status:
            continue
        since = parse_time(cond.get("lastTransitionTime"))
        if since is None:
            continue
        due = since + policy.toleration
        if found is None or due < found[1]:
            found = (cond, due)
    return found


def allowed_unhealthy(total: int) -> int:
    """How many of ``total`` nodes may be unhealthy (20 %, rounded up)."""
    return math.ceil(total * ALLOWED_UNHEALTHY_PERCENT / 100)


class NodeHealth:
    """The ``node.health`` reconciler (see the module docs)."""

    name = "node.health"

    def __init__(
        self,
        *,
        client: Client,
        index: Index,
        cloud_provider: CloudProvider,
        recorder: EventRecorder,
        metrics: KarpenterMetrics,
        clock: Clock,
    ) -> None:
        self._client = client
        self._index = index
        self._provider = cloud_provider
        self._recorder = recorder
        self._metrics = metrics
        self._clock = clock
        self._blocked_events: dict[str, datetime] = {}  # node uid -> last event

    async def reconcile(self, request: Request) -> Result:
        """Repair the node if a policy's toleration has run out (see the module docs)."""
        try:
            node = await self._client.get(kinds.NODE, request.name)
        except errors.NotFound:
            return Result()
        claims = nodeclaims_for_provider_id(
            self._index, (node.get("spec") or {}).get("providerID"))
        if len(claims) != 1 or not self._managed(claims[0]):
            return Result()  # not karpy's node (or an ambiguous one): Karpenter ignores it
        nodeclaim = claims[0]
        found = unhealthy_condition(node, self._provider.repair_policies())
        if found is None:
            return Result()
        condition, due = found
        now = self._clock.now()
        if now < due:
            return Result(requeue_after=(due - now).total_seconds())
        with logging_context(NodeClaim={"name": nodeclaim["metadata"]["name"]},
                             Node={"name": request.name}):
            pool = (nodeclaim["metadata"].get("labels") or {}).get(LABEL_NODEPOOL)
            if not await self._healthy_enough(pool):
                where = "nodepool" if pool else "cluster"
                # Karpenter's words, "then" included, for the cluster-wide case.
                verb = "than" if pool else "then"
                await self._blocked(node, f"more {verb} {ALLOWED_UNHEALTHY_PERCENT}% nodes "
                                          f"are unhealthy in the {where}", now)
                return Result(requeue_after=BLOCKED_RECHECK)
            return await self._repair(node, nodeclaim, condition, now)

    def _managed(self, nodeclaim: Mapping[str, Any]) -> bool:
        ref = (nodeclaim.get("spec") or {}).get("nodeClassRef") or {}
        return any((k.group, k.kind) == (ref.get("group"), ref.get("kind"))
                   for k in self._provider.supported_node_classes())

    async def _healthy_enough(self, pool: str | None) -> bool:
        selector = {LABEL_NODEPOOL: pool} if pool else None
        nodes = await self._client.list(kinds.NODE, label_selector=selector)
        policies = self._provider.repair_policies()
        unhealthy = 0
        for node in nodes:
            by_type = {c.get("type"): c.get("status") for c in _conditions(node)}
            if any(by_type.get(p.condition_type) == p.condition_status for p in policies):
                unhealthy += 1
        return unhealthy <= allowed_unhealthy(len(nodes))

    async def _blocked(self, node: Mapping[str, Any], message: str, now: datetime) -> None:
        uid = str(node["metadata"].get("uid") or node["metadata"]["name"])
        last = self._blocked_events.get(uid)
        if last is not None and now - last < _EVENT_DEDUPE:
            return
        self._blocked_events = {
            k: t for k, t in self._blocked_events.items() if now - t < _EVENT_DEDUPE}
        self._blocked_events[uid] = now
        self._recorder.warning(node, REASON_NODE_REPAIR_BLOCKED, message)

    async def _repair(
        self, node: Mapping[str, Any], nodeclaim: Mapping[str, Any],
        condition: Mapping[str, Any], now: datetime,
    ) -> Result:
        meta = nodeclaim["metadata"]
        name = meta["name"]
        annotations = meta.get("annotations") or {}
        try:
            ends = parse_time(annotations.get(ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP))
        except ValueError:
            ends = None  # unreadable: write a good one
        try:
            # An earlier end than now is kept: pods are forced out already.
            if ends is None or ends >= now:
                stamp = format_time(now)
                await self._client.patch(NODE_CLAIM, name, {"metadata": {"annotations": {
                    ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: stamp}}})
                log.info("annotated nodeclaim",
                         extra={ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: stamp})
            if meta.get("deletionTimestamp"):
                return Result()
            await self._client.delete(NODE_CLAIM, name, uid=meta.get("uid") or None)
        except (errors.NotFound, errors.Conflict):
            return Result()
        log.info("deleting unhealthy node")
        # The Node's labels, as Karpenter's legacy repair reads them.
        labels = disrupted_labels(UNHEALTHY_REASON, node["metadata"].get("labels") or {},
                                  grace_period_of(nodeclaim))
        self._metrics.nodeclaims_disrupted.add(1, labels)
        self._metrics.pods_disruption_initiated.add(
            await reschedulable_pods(self._client, node["metadata"]["name"]), labels)
        self._metrics.nodeclaims_unhealthy_disrupted.add(1, {
            "condition": to_snake_case(str(condition.get("type") or "")),
            "nodepool": labels["nodepool"],
            "capacity_type": labels["capacity_type"],
            "image_id": str((nodeclaim.get("status") or {}).get("imageID") or ""),
            "termination_mode": labels["termination_mode"],
        })
        return Result()
