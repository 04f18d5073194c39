"""The shipped fallback price table is what its generator makes of the reference data,
and is what the provider prices with before the Retail Prices API answers."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import azurearm
from karpy_azure._pricing import MISSING_PRICE, fallback_prices

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "providers/azure/scripts/generate_fallback_prices.py"
SHIPPED = ROOT / "providers/azure/karpy_azure/data/fallback_prices.json"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_fallback_prices", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_table_is_fresh() -> None:
    gen = generator()
    expected = gen.render(gen.generate(azurearm.load("azure-prices.json")))
    assert SHIPPED.read_text() == expected, (
        "karpy_azure/data/fallback_prices.json is stale: rerun "
        "providers/azure/scripts/generate_fallback_prices.py"
    )


def test_the_table_keeps_vm_sizes_only() -> None:
    table = json.loads(SHIPPED.read_text())
    assert set(table["regions"]) == {"southcentralus", "westcentralus"}
    names = set(table["regions"]["southcentralus"])
    assert "Standard_D2s_v3" in names
    assert not any(n.startswith("Basic_") or "_Type" in n for n in names)


def test_fallback_prices_price_spot_as_on_demand() -> None:
    prices = fallback_prices("southcentralus")
    assert prices.on_demand_price("Standard_D2s_v3") == 0.11
    assert prices.spot_price("Standard_D2s_v3") == 0.11
    assert prices.on_demand_price("Standard_Nope") == MISSING_PRICE
    # a location the table lacks borrows southcentralus's
    assert fallback_prices("mars-east").on_demand_price("Standard_D2s_v3") == 0.11
