#!/usr/bin/env python3
"""Generate karpy_azure/data/fallback_prices.json, the price table karpy-azure uses until
(or when) the Retail Prices API cannot be reached.

Input: a price file in the layout of karpy's reference data (../shared/data/azure-prices.json:
``regions -> meter/size name -> {"ondemand": USD per hour}``), taken from Karpenter's Azure
provider (pkg/providers/pricing/zz_generated.pricing.go, Apache-2.0). Only VM sizes
(``Standard_*``) are kept; dedicated-host and Basic-tier meters are dropped.

Usage::

    python providers/azure/scripts/generate_fallback_prices.py \
        /work/shared/data/azure-prices.json > providers/azure/karpy_azure/data/fallback_prices.json

The output is deterministic (sorted keys), so re-running it on the same input changes
nothing; tests/providers/azure/test_pricing.py checks the shipped file is fresh.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def generate(source: dict[str, Any]) -> dict[str, Any]:
    """The shipped table built from a reference price file."""
    regions: dict[str, dict[str, float]] = {}
    for region, meters in sorted(source["regions"].items()):
        regions[region] = {
            name: float(entry["ondemand"])
            for name, entry in sorted(meters.items())
            if name.startswith("Standard_") and "ondemand" in entry
        }
    return {
        "source": source.get("source", ""),
        "license": source.get("license", ""),
        "generated_at": source.get("generated_at", ""),
        "currency": source.get("currency", "USD"),
        "unit": "per hour",
        "regions": regions,
    }


def render(table: dict[str, Any]) -> str:
    """The table as the shipped file's text."""
    return json.dumps(table, indent=1, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    source = json.loads(Path(argv[1]).read_text())
    sys.stdout.write(render(generate(source)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
