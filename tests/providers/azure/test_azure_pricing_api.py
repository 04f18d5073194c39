"""Prices from the Retail Prices API (paged through NextPageLink) on the test server;
spot meters end in " Spot"; Windows and Low Priority are skipped; failures keep the
shipped table."""

from __future__ import annotations

import ssl

import aiohttp
from azurearm.server import ArmServer
from karpy_azure import AzureCloudProvider
from karpy_azure._pricing import fetch_retail_prices

from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider.testing import make_nodepool

POOL = make_nodepool(
    NodeClassReference(group="karpenter.azure.com", kind="AKSNodeClass", name="default")
)


async def test_fetch_pages_and_splits_spot_from_on_demand(arm: ArmServer) -> None:
    context = ssl.create_default_context(cafile=str(arm.cert.cert_file))
    async with aiohttp.ClientSession() as session:
        table = await fetch_retail_prices(session, arm.url, "southcentralus", ssl_context=context)
    pages = [r for r in arm.requests if r.path == "/api/retail/prices"]
    assert len(pages) > 10  # 1,500 sizes x 4 meters, 100 a page
    assert table.on_demand["Standard_D2s_v3"] == 0.11  # not the Windows or Low Priority meter
    assert table.spot["Standard_D2s_v3"] == 0.022
    assert table.source == "retail-prices-api"


async def test_the_provider_prices_offerings_with_fetched_prices(
    azure: AzureCloudProvider,
) -> None:
    types = {it.name: it for it in await azure.get_instance_types(POOL)}
    prices = {o.capacity_type: o.price for o in types["Standard_D2s_v3"].offerings}
    # until the background refresh lands: the shipped table, spot priced as on-demand
    assert prices == {"on-demand": 0.11, "spot": 0.11}
    await azure.catalog.refresh_prices()
    types = {it.name: it for it in await azure.get_instance_types(POOL)}
    prices = {o.capacity_type: o.price for o in types["Standard_D2s_v3"].offerings}
    assert prices == {"on-demand": 0.11, "spot": 0.022}


async def test_a_pricing_outage_keeps_the_shipped_table(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    arm.fail("prices", "ServiceUnavailable", status=503, times=100)
    azure.catalog.price_attempts = 2
    prices = await azure.catalog.refresh_prices()
    assert prices.source == "fallback"
    assert azure.catalog.prices() is prices  # retried in five minutes, not at once
    assert prices.on_demand_price("Standard_D2s_v3") == 0.11
