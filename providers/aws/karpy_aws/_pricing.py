"""Prices: on-demand from the Pricing API, spot from DescribeSpotPriceHistory, with the
shipped table (data/static.json) as the starting point, as in Karpenter AWS
(pkg/providers/pricing/pricing.go).

Until spot prices have been fetched once, an instance type's spot price is its
on-demand price (Karpenter's initial spot pricing), so spot offerings exist from the
start. After the first successful spot refresh, a (type, zone) without a spot price has
no spot offering. In an isolated VPC the Pricing API is never called and the shipped
table stays in use.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from karpy_aws._clients import AWSClients
from karpy_aws._staticdata import static_data

__all__ = ["PricingProvider", "parse_price_list_item"]

log = logging.getLogger("karpy.aws.pricing")

_COMMON_FILTERS = (
    ("serviceCode", "AmazonEC2"),
    ("preInstalledSw", "NA"),
    ("operatingSystem", "Linux"),
    ("capacitystatus", "Used"),
    ("marketoption", "OnDemand"),
)
_SHARED = (("tenancy", "Shared"), ("productFamily", "Compute Instance"))
_METAL = (("tenancy", "Dedicated"), ("productFamily", "Compute Instance (bare metal)"))


def parse_price_list_item(
    item: str | Mapping[str, Any], currency: str = "USD"
) -> tuple[str, float] | None:
    """(instance type, hourly price) from one Pricing API PriceList entry, or None."""
    try:
        data = json.loads(item) if isinstance(item, str) else item
        name = data["product"]["attributes"]["instanceType"]
    except (KeyError, TypeError, ValueError):
        return None
    for term in (data.get("terms", {}).get("OnDemand") or {}).values():
        for dimension in (term.get("priceDimensions") or {}).values():
            try:
                price = float(dimension["pricePerUnit"][currency])
            except (KeyError, TypeError, ValueError):
                continue
            if price > 0:
                return str(name), price
    return None


class PricingProvider:
    """Current prices of the region's instance types."""

    def __init__(self, clients: AWSClients, *, region: str, isolated_vpc: bool = False) -> None:
        self._clients = clients
        self._region = region
        self._isolated = isolated_vpc
        table = static_data().on_demand_prices
        initial: Mapping[str, float] = table.get(region) or table.get("us-east-1") or {}
        self._on_demand: dict[str, float] = dict(initial)
        self._spot: dict[str, dict[str, float]] = {}
        self._spot_updated = False
        self.on_demand_source = "static"

    def on_demand(self, instance_type: str) -> float | None:
        """The on-demand price per hour, or None when unknown."""
        return self._on_demand.get(instance_type)

    def spot(self, instance_type: str, zone: str) -> float | None:
        """The spot price per hour in ``zone``, or None when there is no spot offering."""
        if not self._spot_updated:
            return self._on_demand.get(instance_type)
        return self._spot.get(instance_type, {}).get(zone)

    def price(self, instance_type: str, zone: str, capacity_type: str) -> float | None:
        """What :func:`build_instance_type` asks for."""
        if capacity_type == "spot":
            return self.spot(instance_type, zone)
        return self.on_demand(instance_type)

    async def refresh_on_demand(self) -> bool:
        """Fetch on-demand prices from the Pricing API; False (prices kept) when it
        cannot be reached, is not available here, or answers nothing."""
        if self._isolated or self._region.startswith("us-gov"):
            return False
        currency = "CNY" if self._region.startswith("cn-") else "USD"
        found: dict[str, float] = {}
        try:
            for extra in (_SHARED, _METAL):
                filters = [
                    {"Type": "TERM_MATCH", "Field": f, "Value": v}
                    for f, v in (("regionCode", self._region), *_COMMON_FILTERS, *extra)
                ]
                paginator = self._clients.pricing.get_paginator("get_products")
                async for page in paginator.paginate(
                    ServiceCode="AmazonEC2", Filters=filters, PaginationConfig={"PageSize": 100}
                ):
                    for item in page.get("PriceList", []):
                        parsed = parse_price_list_item(item, currency)
                        if parsed is not None:
                            found[parsed[0]] = parsed[1]
        except Exception as exc:  # the shipped table stays in use; say why once per refresh
            log.warning(
                "on-demand pricing not updated, keeping %s prices: %s", self.on_demand_source, exc
            )
            return False
        if not found:
            return False
        self._on_demand.update(found)
        self.on_demand_source = "pricing-api"
        log.debug("updated on-demand pricing", extra={"instance-type-count": len(self._on_demand)})
        return True

    async def refresh_spot(self) -> bool:
        """Fetch the latest spot price of every type and zone; False when none came."""
        prices: dict[str, dict[str, float]] = {}
        paginator = self._clients.ec2.get_paginator("describe_spot_price_history")
        async for page in paginator.paginate(
            ProductDescriptions=["Linux/UNIX", "Linux/UNIX (Amazon VPC)"],
            StartTime=datetime.now(UTC),
            PaginationConfig={"PageSize": 1000},
        ):
            for record in page.get("SpotPriceHistory", []):
                try:
                    price = float(record["SpotPrice"])
                except (KeyError, ValueError):
                    continue
                prices.setdefault(record["InstanceType"], {})[record["AvailabilityZone"]] = price
        if not prices:
            return False
        for name, zones in prices.items():
            self._spot.setdefault(name, {}).update(zones)
        self._spot_updated = True
        return True
