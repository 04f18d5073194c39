"""The provider's view of what Azure sells in its location: Resource SKUs and prices,
fetched on first use and refreshed when stale.

SKUs change rarely (upstream refreshes them daily); prices are refreshed twice a day, in
the background. A failed price refresh keeps the prices in hand (at first, the shipped
table) and is retried after five minutes, so a pricing outage never blocks scheduling. A failed SKU
fetch raises: without SKUs there is nothing to launch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Callable, Sequence
from typing import Final

import aiohttp

from karpy_azure._arm import ArmClients
from karpy_azure._pricing import PriceTable, fallback_prices, fetch_retail_prices
from karpy_azure._settings import AzureSettings
from karpy_azure._skus import Sku, parse_skus

__all__ = ["Catalog"]

log = logging.getLogger("karpy.cloudprovider.azure")

SKU_TTL: Final = 12 * 3600.0
PRICE_TTL: Final = 12 * 3600.0
PRICE_RETRY: Final = 300.0


class Catalog:
    """Resource SKUs and prices of one location (see the module docstring)."""

    def __init__(
        self,
        settings: AzureSettings,
        arm: ArmClients,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._arm = arm
        self._monotonic = monotonic
        self._skus: Sequence[Sku] = ()
        self._skus_at = -SKU_TTL
        self._prices = fallback_prices(settings.location)
        self._prices_at = -PRICE_TTL
        self._sku_lock = asyncio.Lock()
        self._price_lock = asyncio.Lock()
        self._session: aiohttp.ClientSession | None = None
        self._refresh: asyncio.Task[PriceTable] | None = None
        self.version = 0
        #: tries per Retail Prices page (429 and 5xx are retried with backoff)
        self.price_attempts = 5

    async def skus(self) -> Sequence[Sku]:
        """The location's VM SKUs (fetched when older than 12 hours)."""
        if self._monotonic() - self._skus_at < SKU_TTL:
            return self._skus
        async with self._sku_lock:
            if self._monotonic() - self._skus_at < SKU_TTL:
                return self._skus
            location = self._settings.location
            raw = [
                sku.as_dict()
                async for sku in self._arm.compute.resource_skus.list(
                    filter=f"location eq '{location}'"
                )
            ]
            self._skus = parse_skus(raw, location)
            self._skus_at = self._monotonic()
            self.version += 1
            log.info("discovered SKUs", extra={"skuCount": len(self._skus)})
            return self._skus

    def prices(self) -> PriceTable:
        """The prices in hand. When they are stale, a refresh from the Retail Prices API
        starts in the background (the catalog owns the task; :meth:`close` cancels it), so
        paging through thousands of meters never delays scheduling."""
        if (
            self._settings.pricing_enabled
            and self._monotonic() - self._prices_at >= PRICE_TTL
            and (self._refresh is None or self._refresh.done())
        ):
            self._refresh = asyncio.create_task(
                self.refresh_prices(), name="karpy-azure:pricing-refresh"
            )
        return self._prices

    async def refresh_prices(self) -> PriceTable:
        """Fetch the prices now (when stale); on failure keep those in hand and retry in
        five minutes."""
        async with self._price_lock:
            if self._monotonic() - self._prices_at < PRICE_TTL:
                return self._prices
            try:
                fetched = await fetch_retail_prices(
                    self._http(),
                    self._settings.pricing_endpoint,
                    self._settings.location,
                    ssl_context=self._ssl_context(),
                    attempts=self.price_attempts,
                )
            except Exception as exc:  # any failure keeps the prices in hand
                log.error("failed to fetch updated pricing, using existing pricing data: %s", exc)
                self._prices_at = self._monotonic() - PRICE_TTL + PRICE_RETRY
                return self._prices
            if fetched.on_demand:
                spot = fetched.spot or self._prices.spot
                self._prices = PriceTable(fetched.on_demand, spot, fetched.source)
                self.version += 1
                log.info("updated on-demand pricing",
                         extra={"instanceTypeCount": len(fetched.on_demand)})
            self._prices_at = self._monotonic()
            return self._prices

    def _ssl_context(self) -> ssl.SSLContext | None:
        if not self._settings.ca_bundle:
            return None
        return ssl.create_default_context(cafile=self._settings.ca_bundle)

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        return self._session

    async def close(self) -> None:
        """Cancel a refresh in flight and close the pricing HTTP session."""
        if self._refresh is not None:
            self._refresh.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresh
            self._refresh = None
        if self._session is not None:
            await self._session.close()
            self._session = None
