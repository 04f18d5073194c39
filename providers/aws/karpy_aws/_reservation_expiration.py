"""The ``capacityreservation.expiration`` controller: nodes of a capacity block are
drained before the block ends (Karpenter AWS's
pkg/controllers/capacityreservation/expiration).

EC2 starts reclaiming a capacity block's instances 30 minutes before its end time.
Every minute this controller lists the NodeClaims labelled with a
``karpenter.k8s.aws/capacity-reservation-id``, describes those reservations by ID, and
deletes the NodeClaims of every capacity block that is ``expiring`` (within 40 minutes
of its end, :data:`karpy_aws._reservations.EXPIRATION_WINDOW`): termination cordons and
drains the node (PDBs respected) and provisioning replaces it elsewhere, 10 minutes
before EC2 begins to take the instances back. Log ``initiating delete for capacity
block expiration``, as Karpenter's. A singleton: ``reconcile()`` is one pass.
"""

from __future__ import annotations

import logging
from typing import Final

from karpy.cloudprovider import NODE_CLAIM
from karpy.runtime import Client, Result
from karpy.runtime import errors as kerrors
from karpy_aws._reservations import CapacityReservations, reservation_status
from karpy_aws.apis import labels as aws
from karpy_aws.apis.ec2nodeclass import CapacityReservationSelectorTerm

__all__ = ["EXPIRATION_INTERVAL", "ReservationExpirationController"]

log = logging.getLogger("karpy.aws.capacityreservation")

EXPIRATION_INTERVAL: Final = 60.0
"""Seconds between passes (Karpenter's requeue)."""


class ReservationExpirationController:
    """Deletes the NodeClaims of expiring capacity blocks (see the module doc)."""

    name = "capacityreservation.expiration"

    def __init__(self, reservations: CapacityReservations, client: Client) -> None:
        self._reservations = reservations
        self._client = client

    async def reconcile(self) -> Result:
        """One pass over the NodeClaims in capacity blocks (an ODCR never expires)."""
        claims = [
            c
            for c in await self._client.list(NODE_CLAIM)
            if ((c.get("metadata") or {}).get("labels") or {}).get(
                aws.LABEL_CAPACITY_RESERVATION_TYPE
            ) == "capacity-block"
        ]
        if not claims:
            return Result(requeue_after=EXPIRATION_INTERVAL)
        ids = sorted({c["metadata"]["labels"][aws.LABEL_CAPACITY_RESERVATION_ID] for c in claims})
        reservations = self._reservations
        # the minute-old answers will do: a block's end does not move, and the window
        # is 40 minutes
        described = await reservations.select(
            [CapacityReservationSelectorTerm.model_validate({"id": rid}) for rid in ids]
        )
        now = reservations.wall()
        expiring: set[str] = set()
        for found in described:
            try:
                if reservation_status(found, now).state == "expiring":
                    expiring.add(str(found["CapacityReservationId"]))
            except ValueError as exc:
                log.error("failed to parse capacity reservation", extra={"error": str(exc)})
        for claim in claims:
            rid = claim["metadata"]["labels"][aws.LABEL_CAPACITY_RESERVATION_ID]
            if rid not in expiring or claim["metadata"].get("deletionTimestamp"):
                continue
            name = claim["metadata"]["name"]
            try:
                await self._client.delete(NODE_CLAIM, name)
            except kerrors.NotFound:
                continue
            log.info(
                "initiating delete for capacity block expiration",
                extra={"NodeClaim": {"name": name}, "capacity-reservation-id": rid},
            )
        return Result(requeue_after=EXPIRATION_INTERVAL)
