"""What an Azure capacity refusal makes unavailable, and for how long (the provider marks
those offerings in its :class:`~karpy.cloudprovider.UnavailableOfferings`).

TTLs follow upstream: one hour for allocation failures and spot SKUNotAvailable, 23 hours
for on-demand SKUNotAvailable, ten minutes for a quota that may free up soon.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from karpy.apis.labels import CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT
from karpy.cloudprovider import OfferingKey
from karpy.cloudprovider.launch import LaunchChoice
from karpy_azure._arm import CapacityError
from karpy_azure._instancetypes import REGIONAL_ZONE

__all__ = [
    "ALLOCATION_FAILURE_TTL",
    "LOW_QUOTA_TTL",
    "QUOTA_REACHED_TTL",
    "SKU_NOT_AVAILABLE_ON_DEMAND_TTL",
    "SKU_NOT_AVAILABLE_SPOT_TTL",
    "capacity_keys",
    "capacity_ttl",
]

ALLOCATION_FAILURE_TTL: Final = timedelta(hours=1)
SKU_NOT_AVAILABLE_SPOT_TTL: Final = timedelta(hours=1)
SKU_NOT_AVAILABLE_ON_DEMAND_TTL: Final = timedelta(hours=23)
QUOTA_REACHED_TTL: Final = timedelta(hours=1)
LOW_QUOTA_TTL: Final = timedelta(minutes=10)


def capacity_ttl(cap: CapacityError, capacity_type: str, message: str) -> timedelta:
    """How long the offerings ``cap`` names stay unavailable (``message`` is ARM's)."""
    if cap.reason == "SKUNotAvailable":
        return SKU_NOT_AVAILABLE_ON_DEMAND_TTL if capacity_type == CAPACITY_TYPE_ON_DEMAND else (
            SKU_NOT_AVAILABLE_SPOT_TTL
        )
    if cap.reason == "SubscriptionQuotaReached":
        return QUOTA_REACHED_TTL if "Current Limit: 0" in message or cap.scope == "spot" else (
            LOW_QUOTA_TTL
        )
    return ALLOCATION_FAILURE_TTL


def capacity_keys(cap: CapacityError, choice: LaunchChoice) -> list[OfferingKey]:
    """The offerings of ``choice``'s instance type that ``cap`` (by its scope: the
    offering, the zone, the placement, the capacity type, all spot) makes unavailable."""
    it, offering = choice.instance_type, choice.offering
    scope_of = "regional" if offering.zone == REGIONAL_ZONE else "zonal"
    keys: list[OfferingKey] = []
    for o in it.offerings:
        same_scope = ("regional" if o.zone == REGIONAL_ZONE else "zonal") == scope_of
        if (
            (cap.scope == "offering" and o.zone == offering.zone and
             o.capacity_type == offering.capacity_type)
            or (cap.scope == "zone" and o.zone == offering.zone)
            or (cap.scope == "placement" and same_scope)
            or (cap.scope == "capacity-type" and o.capacity_type == offering.capacity_type)
            or (cap.scope == "spot" and o.capacity_type == CAPACITY_TYPE_SPOT)
        ):
            keys.append(OfferingKey(it.name, o.zone, o.capacity_type))
    return keys
