"""What karpy does about an EC2 warning for some instances, shared by the interruption
controllers (the SQS queue's, :mod:`karpy_aws._interruption`, and the instance status
checks', :mod:`karpy_aws._instancestatus`), as Karpenter AWS's ``InterruptionHandler``
(pkg/controllers/interruption/utils.go).

For each NodeClaim whose instance the warning names: the kind's event on the NodeClaim
and its Node; then, unless the kind is a rebalance recommendation or the NodeClaim is
already terminating, its deletion (``TerminatingOnInterruption``, log ``initiating
delete from interruption message``). A spot interruption marks the spot offering
unavailable first, a capacity reservation interruption the NodeClaim's reservation
(:class:`karpy_aws._reservations.CapacityReservations`); a failed instance or system
status check sets ``karpenter.sh/nodeclaim-termination-timestamp`` to now first, so
termination skips the graceful drain a broken instance cannot do.

Beyond Karpenter, opt-in per NodePool (``karpy.dev/replace-on-rebalance-recommendation:
"true"``): a rebalance recommendation for one of its spot NodeClaims marks that spot
offering unavailable (as an interruption does, so no replacement goes back to the pool
EC2 says is at risk) and annotates the NodeClaim with when it came and
``karpy.dev/drift-cost-checked``; the provider then reports it drifted
(``RebalanceRecommendation``), and the core's drift method replaces it gracefully,
replacement first, within the NodePool's budgets, only if the replacement costs no more
than the node. Without the annotation, or for an on-demand node, it is an event only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from karpy.apis import labels as wk
from karpy.apis.annotations import (
    ANNOTATION_DRIFT_COST_CHECKED,
    ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP,
)
from karpy.cloudprovider import NODE_CLAIM, NODE_POOL, OfferingKey, UnavailableOfferings
from karpy.runtime import Client, EventRecorder, format_time
from karpy.runtime import errors as kerrors
from karpy.runtime.kinds import NODE
from karpy_aws._clients import AWSAccess
from karpy_aws._interruption_messages import (
    CAPACITY_RESERVATION_INTERRUPTED,
    EVENT_STATUS,
    INSTANCE_STATUS,
    INSTANCE_STOPPED,
    INSTANCE_TERMINATED,
    REBALANCE_RECOMMENDATION,
    SCHEDULED_CHANGE,
    SPOT_INTERRUPTED,
    SYSTEM_STATUS,
)
from karpy_aws._reservations import CapacityReservations
from karpy_aws.apis import labels as aws

__all__ = [
    "ANNOTATION_REBALANCE_RECOMMENDED",
    "ANNOTATION_REPLACE_ON_REBALANCE",
    "FORCEFUL",
    "InterruptionHandler",
    "InterruptionParts",
    "OfferingMarks",
]

log = logging.getLogger("karpy.aws.interruption")

_UNHEALTHY: Final = ("InstanceUnhealthy", "An unhealthy warning was triggered for the instance")
_EVENTS: Final = {
    SPOT_INTERRUPTED: ("SpotInterrupted", "Spot interruption warning was triggered"),
    REBALANCE_RECOMMENDATION: (
        "SpotRebalanceRecommendation",
        "Spot rebalance recommendation was triggered",
    ),
    INSTANCE_STOPPED: ("InstanceStopping", "Instance is stopping"),
    INSTANCE_TERMINATED: ("InstanceTerminating", "Instance is terminating"),
    CAPACITY_RESERVATION_INTERRUPTED: (
        "CapacityReservationInstanceInterrupted",
        "Capacity Reservation interruption warning was triggered",
    ),
    SCHEDULED_CHANGE: _UNHEALTHY,
    INSTANCE_STATUS: _UNHEALTHY,
    SYSTEM_STATUS: _UNHEALTHY,
    EVENT_STATUS: _UNHEALTHY,
}
#: kinds whose NodeClaims terminate without a graceful drain (the instance is broken)
FORCEFUL: Final = frozenset({INSTANCE_STATUS, SYSTEM_STATUS})
ANNOTATION_REPLACE_ON_REBALANCE: Final = "karpy.dev/replace-on-rebalance-recommendation"
"""On a NodePool: ``"true"`` replaces its spot nodes on a rebalance recommendation."""
ANNOTATION_REBALANCE_RECOMMENDED: Final = "karpy.dev/rebalance-recommended-at"
"""On a NodeClaim: when EC2 recommended rebalancing it away (the provider then reports
it drifted, reason ``RebalanceRecommendation``)."""


class OfferingMarks(Protocol):
    """What the handler needs of the provider: where a spot interruption marks its
    offering unavailable and a capacity reservation interruption its reservation."""

    @property
    def unavailable(self) -> UnavailableOfferings:
        """The offerings launches avoid for a while."""
        ...

    @property
    def reservations(self) -> CapacityReservations:
        """The capacity reservations and their slots left."""
        ...


class InterruptionParts(AWSAccess, OfferingMarks, Protocol):
    """What the interruption controllers (the queue's and the instance status
    checks') need of the provider: AWS, and the marks their handler sets."""


class InterruptionHandler:
    """What the interruption controllers (the SQS queue's and the instance status
    checks') do about a warning for some instances: the events, and the deletion of
    their NodeClaims (Karpenter AWS's ``InterruptionHandler``)."""

    def __init__(
        self, provider: OfferingMarks, client: Client, recorder: EventRecorder | None
    ) -> None:
        self._provider = provider
        self._client = client
        self._recorder = recorder

    async def act(self, kind: str, instance_ids: Iterable[str]) -> list[str]:
        """Act on a warning of ``kind`` for ``instance_ids``; return the names of the
        NodeClaims found for them (acted on unless the kind is a recommendation)."""
        wanted = set(instance_ids)
        claims = [
            c
            for c in await self._client.list(NODE_CLAIM)
            if str((c.get("status") or {}).get("providerID", "")).rsplit("/", 1)[-1] in wanted
        ]
        reason, text = _EVENTS[kind]
        for claim in claims:
            name = claim["metadata"]["name"]
            node = await self._node(claim)
            self._event(claim, reason, text)
            if node is not None:
                self._event(node, reason, text)
            if kind == REBALANCE_RECOMMENDATION:
                await self._rebalance(claim)
                continue
            if kind == SPOT_INTERRUPTED:
                labels = claim["metadata"].get("labels") or {}
                if labels.get(wk.LABEL_INSTANCE_TYPE) and labels.get(wk.LABEL_ZONE):
                    self._provider.unavailable.mark(
                        OfferingKey(
                            labels[wk.LABEL_INSTANCE_TYPE],
                            labels[wk.LABEL_ZONE],
                            wk.CAPACITY_TYPE_SPOT,
                        ),
                        reason="SpotInterruption",
                    )
            if kind == CAPACITY_RESERVATION_INTERRUPTED:
                labels = claim["metadata"].get("labels") or {}
                if labels.get(aws.LABEL_CAPACITY_RESERVATION_ID):
                    self._provider.reservations.mark_unavailable(
                        labels[aws.LABEL_CAPACITY_RESERVATION_ID]
                    )
            if claim["metadata"].get("deletionTimestamp"):
                continue  # already terminating (a warning repeated, or a second one)
            try:
                if kind in FORCEFUL:
                    await self._skip_graceful_drain(claim)
                await self._client.delete(NODE_CLAIM, name)
            except kerrors.NotFound:
                continue
            log.info(
                "initiating delete from interruption message",
                extra={"messageKind": kind, "NodeClaim": name},
            )
            self._event(
                claim,
                "TerminatingOnInterruption",
                "Interruption triggered termination for the NodeClaim",
            )
            if node is not None:
                self._event(
                    node,
                    "TerminatingOnInterruption",
                    "Interruption triggered termination for the Node",
                )
        return [c["metadata"]["name"] for c in claims]

    async def _rebalance(self, claim: Mapping[str, Any]) -> None:
        """Start the graceful replacement of a spot NodeClaim whose NodePool opted in
        (see the module docs); nothing for any other."""
        meta = claim["metadata"]
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        if (meta.get("deletionTimestamp") or ANNOTATION_REBALANCE_RECOMMENDED in annotations
                or labels.get(wk.LABEL_CAPACITY_TYPE) != wk.CAPACITY_TYPE_SPOT):
            return
        try:
            pool = await self._client.get(NODE_POOL, str(labels.get(wk.LABEL_NODEPOOL, "")))
        except kerrors.NotFound:
            return
        opted = ((pool.get("metadata") or {}).get("annotations") or {}).get(
            ANNOTATION_REPLACE_ON_REBALANCE)
        if opted != "true":
            return
        if labels.get(wk.LABEL_INSTANCE_TYPE) and labels.get(wk.LABEL_ZONE):
            self._provider.unavailable.mark(
                OfferingKey(labels[wk.LABEL_INSTANCE_TYPE], labels[wk.LABEL_ZONE],
                            wk.CAPACITY_TYPE_SPOT),
                reason="RebalanceRecommendation",
            )
        try:
            await self._client.patch(NODE_CLAIM, meta["name"], {"metadata": {"annotations": {
                ANNOTATION_REBALANCE_RECOMMENDED: format_time(datetime.now(UTC)),
                ANNOTATION_DRIFT_COST_CHECKED: "true",
            }}})
        except kerrors.NotFound:
            return
        log.info("replacing on rebalance recommendation",
                 extra={"NodeClaim": meta["name"], "NodePool": labels.get(wk.LABEL_NODEPOOL)})

    async def _skip_graceful_drain(self, claim: Mapping[str, Any]) -> None:
        """A broken instance cannot drain gracefully: the termination timestamp set to
        now makes termination skip PDB-respecting eviction and volume detachment waits,
        as Karpenter does for failed status checks."""
        annotations = claim["metadata"].get("annotations") or {}
        if ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP in annotations:
            return
        now = format_time(datetime.now(UTC))
        await self._client.patch(
            NODE_CLAIM,
            claim["metadata"]["name"],
            {"metadata": {"annotations": {ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: now}}},
        )

    async def _node(self, claim: Mapping[str, Any]) -> Mapping[str, Any] | None:
        node_name = (claim.get("status") or {}).get("nodeName")
        if not node_name:
            return None
        try:
            return await self._client.get(NODE, node_name)
        except kerrors.NotFound:
            return None

    def _event(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        if self._recorder is None:
            return
        self._recorder.warning(obj, reason, message)
