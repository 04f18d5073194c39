"""Prices: the shipped table first, then the Pricing API (a local handler in its shape,
since moto has none) and DescribeSpotPriceHistory (moto)."""

from __future__ import annotations

from karpy_aws import AWSSettings
from karpy_aws._clients import AWSClients
from karpy_aws._pricing import PricingProvider, parse_price_list_item
from moto_harness import PricingServer, price_list_item


async def test_on_demand_prices_come_from_the_pricing_api(aws_account: object) -> None:
    url = aws_account.url  # type: ignore[attr-defined]
    with PricingServer(
        {"m5.large": 0.5, "m5.xlarge": 1.0, "c5.large": 0.25}, region="us-east-1", page_size=2
    ) as api:
        settings = AWSSettings(
            cluster_name="c", region="us-east-1", endpoint_url=url, pricing_endpoint_url=api.url
        )
        clients = await AWSClients.open(settings)
        try:
            pricing = PricingProvider(clients, region="us-east-1")
            assert pricing.on_demand("m5.large") == 0.096  # shipped table
            assert await pricing.refresh_on_demand()
            assert pricing.on_demand("m5.large") == 0.5
            assert pricing.on_demand("c5.large") == 0.25
            assert pricing.on_demand("t3.micro") == 0.0104  # not in the answer: kept
            # two product families x two pages of the three prices (page size 2)
            assert len(api.requests) == 4
            filters = {f["Field"]: f["Value"] for f in api.requests[0]["Filters"]}
            assert filters["regionCode"] == "us-east-1"
            assert filters["operatingSystem"] == "Linux"
            assert clients.calls["pricing:GetProducts"] == 4
        finally:
            await clients.aclose()


async def test_isolated_vpc_never_calls_the_pricing_api(aws_account: object) -> None:
    with PricingServer({"m5.large": 0.5}, region="us-east-1") as api:
        settings = AWSSettings(
            cluster_name="c", region="us-east-1", pricing_endpoint_url=api.url, isolated_vpc=True
        )
        clients = await AWSClients.open(settings)
        try:
            pricing = PricingProvider(clients, region="us-east-1", isolated_vpc=True)
            assert not await pricing.refresh_on_demand()
            assert pricing.on_demand("m5.large") == 0.096
            assert api.requests == []
        finally:
            await clients.aclose()


async def test_spot_prices_are_per_zone_after_the_first_refresh(aws_clients: AWSClients) -> None:
    pricing = PricingProvider(aws_clients, region="us-east-1", isolated_vpc=True)
    # before spot prices are known, spot costs what on-demand does (Karpenter's start)
    assert pricing.spot("m5.large", "us-east-1a") == 0.096
    assert await pricing.refresh_spot()
    assert pricing.spot("m5.large", "us-east-1a") is not None
    assert pricing.spot("m5.large", "us-east-1a") != 0.096
    assert pricing.spot("m5.large", "nowhere-1z") is None


def test_price_list_items_parse_and_bad_ones_are_skipped() -> None:
    assert parse_price_list_item(price_list_item("m5.large", "us-east-1", 0.25)) == (
        "m5.large",
        0.25,
    )
    assert parse_price_list_item("{not json") is None
    assert parse_price_list_item('{"product": {}}') is None
