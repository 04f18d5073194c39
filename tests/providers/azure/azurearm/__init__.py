"""An ARM-shaped HTTPS test server for karpy-azure's tests: the Azure Resource Manager
operations the provider uses (Resource SKUs, NICs, VMs and VM extensions with
long-running operations, network security groups, subnets, community gallery image
versions) and the Retail Prices API, serving the
recorded shapes in ``data/`` (copied from karpy's shared reference data, taken from
Karpenter's Azure provider under Apache-2.0; see data/README.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"


def load(name: str) -> Any:
    """A JSON file of ``data/``."""
    return json.loads((DATA / name).read_text())


def skus(location: str) -> list[dict[str, Any]]:
    """The recorded Resource SKUs of ``location``."""
    value: list[dict[str, Any]] = load(f"azure-skus-{location}.json")["value"]
    return value
