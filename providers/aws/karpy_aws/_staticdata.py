"""The tables the provider ships (data/static.json): on-demand prices, network
bandwidth and VPC limits, generated from Karpenter AWS's zz_generated tables by
``providers/aws/scripts/generate_static_data.py``.

They are the fallback while (or when) the Pricing API cannot be reached, and the only
source for what EC2 does not describe: the branch-ENI count behind
``vpc.amazonaws.com/pod-eni`` and the bandwidth label.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from types import MappingProxyType
from typing import Any

__all__ = ["StaticData", "static_data"]


@dataclass(frozen=True, slots=True)
class StaticData:
    """The shipped tables, read-only."""

    on_demand_prices: MappingProxyType[str, MappingProxyType[str, float]]
    network_bandwidth_mbps: MappingProxyType[str, int]
    #: instance type -> (branch ENIs when trunking-compatible else 0, IPv4 per ENI)
    vpc_limits: MappingProxyType[str, tuple[int, int]]
    prices_generated_at: str

    def on_demand_price(self, region: str, instance_type: str) -> float | None:
        """The shipped on-demand price; regions without a table fall back to us-east-1
        (as Karpenter does for its initial prices)."""
        table = self.on_demand_prices.get(region) or self.on_demand_prices.get("us-east-1")
        return None if table is None else table.get(instance_type)


@cache
def static_data() -> StaticData:
    """Load data/static.json once."""
    raw: dict[str, Any] = json.loads(
        files("karpy_aws").joinpath("data/static.json").read_text(encoding="utf-8")
    )
    return StaticData(
        on_demand_prices=MappingProxyType(
            {
                region: MappingProxyType({k: float(v) for k, v in table.items()})
                for region, table in raw["on_demand_prices"].items()
            }
        ),
        network_bandwidth_mbps=MappingProxyType(
            {k: int(v) for k, v in raw["network_bandwidth_mbps"].items()}
        ),
        vpc_limits=MappingProxyType(
            {k: (int(v[0]), int(v[1])) for k, v in raw["vpc_limits"].items()}
        ),
        prices_generated_at=str(raw["on_demand_prices_generated_at"]),
    )
