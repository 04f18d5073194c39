"""How long an offering Azure refused stays unavailable (the provider marks it in its
:class:`~karpy.cloudprovider.UnavailableOfferings`).

TTLs follow upstream: one hour for allocation failures and spot SKUNotAvailable, 23 hours
for on-demand SKUNotAvailable, ten minutes for a quota that may free up soon.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from karpy_azure._arm import CapacityError
from karpy_azure._instancetypes import ON_DEMAND

__all__ = [
    "ALLOCATION_FAILURE_TTL",
    "LOW_QUOTA_TTL",
    "QUOTA_REACHED_TTL",
    "SKU_NOT_AVAILABLE_ON_DEMAND_TTL",
    "SKU_NOT_AVAILABLE_SPOT_TTL",
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
        return SKU_NOT_AVAILABLE_ON_DEMAND_TTL if capacity_type == ON_DEMAND else (
            SKU_NOT_AVAILABLE_SPOT_TTL
        )
    if cap.reason == "SubscriptionQuotaReached":
        return QUOTA_REACHED_TTL if "Current Limit: 0" in message or cap.scope == "spot" else (
            LOW_QUOTA_TTL
        )
    return ALLOCATION_FAILURE_TTL
