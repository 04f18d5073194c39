"""``Drifted``: the NodeClaim no longer matches what its NodePool would launch now.

Karpenter's ``nodeclaim/disruption/drift.go``, checked cheapest first; the first reason
found is the condition's reason (and message):

1. ``NodePoolDrifted`` — static drift: the NodeClaim's ``karpenter.sh/nodepool-hash``
   differs from its NodePool's, when both carry the same hash version (after a version
   change the hashes cannot be compared; ``nodepool.hash`` re-stamps the NodeClaims);
2. ``RequirementsDrifted`` — a NodePool requirement the NodeClaim's labels no longer
   satisfy (a label the NodePool requires and the NodeClaim lacks counts);
3. ``InstanceTypeNotFound`` — the NodeClaim's instance type is gone from the provider's
   catalogue for the NodePool, or none of its offerings matches the NodeClaim's zone and
   capacity type any more. The catalogue is consulted at most once per 30 minutes per
   NodeClaim and not in its first hour (a successful check is remembered, a failed one
   is not, so a transient gap is noticed quickly);
4. whatever ``CloudProvider.is_drifted`` says (e.g. ``AMIDrift``).

A NodeClaim not yet launched has no Drifted condition. Drift is looked at again every
:data:`DRIFT_RECHECK` even when nothing changed, since provider drift has no event.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Final

from karpy.apis import NodeClaim, NodePool
from karpy.apis.annotations import ANNOTATION_NODEPOOL_HASH, ANNOTATION_NODEPOOL_HASH_VERSION
from karpy.apis.labels import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    WELL_KNOWN_LABELS,
    WELL_KNOWN_LABELS_FOR_OFFERINGS,
)
from karpy.apis.v1.nodeclaim import CONDITION_DRIFTED, CONDITION_LAUNCHED
from karpy.cloudprovider import CloudProvider, InstanceType, NodeClaimNotFoundError
from karpy.controllers.nodeclaim.disruptionconditions._step import conditions, log
from karpy.runtime import Clock
from karpy.scheduling.requirements import IN, Requirement, Requirements

__all__ = [
    "DRIFT_RECHECK",
    "INSTANCE_TYPE_NOT_FOUND",
    "NODEPOOL_DRIFTED",
    "REQUIREMENTS_DRIFTED",
    "Drift",
    "instance_type_not_found",
    "requirements_drifted",
    "static_drifted",
]

NODEPOOL_DRIFTED: Final = "NodePoolDrifted"
REQUIREMENTS_DRIFTED: Final = "RequirementsDrifted"
INSTANCE_TYPE_NOT_FOUND: Final = "InstanceTypeNotFound"

DRIFT_RECHECK: Final = 300.0
"""Seconds between looks at a launched NodeClaim's drift (Karpenter's 5 minutes)."""
_CATALOGUE_GRACE: Final = timedelta(hours=1)
_CATALOGUE_CHECK_TTL: Final = timedelta(minutes=30)


def static_drifted(nodepool: NodePool, nodeclaim: NodeClaim) -> str | None:
    """``NodePoolDrifted`` when the hashes differ under the same hash version."""
    pool = nodepool.metadata.annotations
    claim = nodeclaim.metadata.annotations
    keys = (ANNOTATION_NODEPOOL_HASH, ANNOTATION_NODEPOOL_HASH_VERSION)
    if not all(k in pool and k in claim for k in keys):
        return None
    if pool[ANNOTATION_NODEPOOL_HASH_VERSION] != claim[ANNOTATION_NODEPOOL_HASH_VERSION]:
        return None
    if pool[ANNOTATION_NODEPOOL_HASH] != claim[ANNOTATION_NODEPOOL_HASH]:
        return NODEPOOL_DRIFTED
    return None


def requirements_drifted(nodepool: NodePool, nodeclaim: NodeClaim) -> str | None:
    """``RequirementsDrifted`` when the NodeClaim's labels do not meet every NodePool
    requirement (Karpenter's ``Compatible`` with no undefined labels allowed)."""
    wanted = Requirements.from_node_selector(
        r.to_dict() for r in nodepool.spec.template.spec.requirements
    )
    if Requirements.from_labels(nodeclaim.metadata.labels).compatible(wanted) is not None:
        return REQUIREMENTS_DRIFTED
    return None


def instance_type_not_found(
    instance_types: Sequence[InstanceType], labels: Mapping[str, str]
) -> str | None:
    """``InstanceTypeNotFound`` when no instance type of ``instance_types`` has the
    NodeClaim's name and an offering (available or not) matching its labels.

    A reserved NodeClaim may have been demoted to on-demand before its label caught up,
    so it matches reserved or on-demand offerings, whatever their reservation.
    """
    name = labels.get(LABEL_INSTANCE_TYPE)
    found = next((it for it in instance_types if it.name == name), None)
    if found is None:
        return INSTANCE_TYPE_NOT_FOUND
    reserved = labels.get(LABEL_CAPACITY_TYPE) == CAPACITY_TYPE_RESERVED
    for offering in found.offerings:
        offering_keys = set(offering.requirements)
        if reserved:
            # Labels the offering adds beyond zone and capacity type (a reservation ID):
            # not compared, as Karpenter drops its reserved-capacity labels.
            extra = offering_keys - WELL_KNOWN_LABELS_FOR_OFFERINGS
            kept = {k: v for k, v in labels.items()
                    if k not in extra and k != LABEL_CAPACITY_TYPE}
            reqs = Requirements.from_labels(kept).add(Requirement.new(
                LABEL_CAPACITY_TYPE, IN, (CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_ON_DEMAND)))
            allowed = frozenset(WELL_KNOWN_LABELS | extra)
        else:
            reqs = Requirements.from_labels(labels)
            allowed = WELL_KNOWN_LABELS
        if reqs.compatible(offering.requirements, allow_undefined=allowed) is None:
            return None
    return INSTANCE_TYPE_NOT_FOUND


class Drift:
    """The ``Drifted`` step (see the module docs)."""

    def __init__(self, *, cloud_provider: CloudProvider, clock: Clock) -> None:
        self._provider = cloud_provider
        self._clock = clock
        # NodeClaim uid -> until when its instance type is known to be in the catalogue.
        self._catalogue_ok: dict[str, datetime] = {}

    def forget(self, uids: Iterable[str]) -> None:
        """Drop what is remembered of these NodeClaims (deleted ones)."""
        for uid in uids:
            self._catalogue_ok.pop(uid, None)

    async def reconcile(self, nodepool: NodePool, nodeclaim: NodeClaim) -> float | None:
        """Set or clear Drifted; look again in :data:`DRIFT_RECHECK` once launched."""
        conds = conditions(nodeclaim, self._clock)
        present = conds.get(CONDITION_DRIFTED) is not None
        launched = conds.get(CONDITION_LAUNCHED)
        if launched is None or launched.status != "True":
            if present:
                conds.clear(CONDITION_DRIFTED)
                log.debug("removing drift status condition, isn't launched")
            return None
        try:
            reason = await self.drift_reason(nodepool, nodeclaim)
        except NodeClaimNotFoundError:
            return None  # the instance is gone: garbage collection deals with it
        if reason is None:
            if present:
                conds.clear(CONDITION_DRIFTED)
                log.debug("removing drifted status condition, not drifted")
            return DRIFT_RECHECK
        conds.set_true(CONDITION_DRIFTED, reason, reason)
        if not present:
            log.debug("marking drifted", extra={"reason": reason})
        return DRIFT_RECHECK

    async def drift_reason(self, nodepool: NodePool, nodeclaim: NodeClaim) -> str | None:
        """Why the NodeClaim has drifted (the first reason found), or None."""
        reason = static_drifted(nodepool, nodeclaim) or requirements_drifted(nodepool, nodeclaim)
        if reason is not None:
            return reason
        reason = await self._catalogue_drift(nodepool, nodeclaim)
        if reason is not None:
            return reason
        provider_reason = await self._provider.is_drifted(nodeclaim)
        return str(provider_reason) if provider_reason else None

    async def _catalogue_drift(self, nodepool: NodePool, nodeclaim: NodeClaim) -> str | None:
        now = self._clock.now()
        created = nodeclaim.metadata.creation_timestamp
        if created is None or now - created <= _CATALOGUE_GRACE:
            return None
        uid = nodeclaim.metadata.uid or ""
        checked_until = self._catalogue_ok.get(uid)
        if checked_until is not None and now < checked_until:
            return None
        instance_types = await self._provider.get_instance_types(nodepool)
        reason = instance_type_not_found(instance_types, nodeclaim.metadata.labels)
        if reason is None:
            self._catalogue_ok[uid] = now + _CATALOGUE_CHECK_TTL
        return reason
