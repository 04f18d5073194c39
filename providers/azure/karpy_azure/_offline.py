"""Offline mode (``--provider-setting offline=true``): the Azure provider as a price list.

``karpy simulate``, ``explain`` and ``top`` need the instance types a NodePool could
launch and what they cost, nothing more. Offline, they come from tables shipped in the
package, so those tools run with no network and no credentials:

* SKUs: ``data/skus.json``, Resource SKUs list responses per location (from Karpenter's
  Azure provider's fake data), pruned to what :mod:`karpy_azure._skus` reads, generated
  by providers/azure/scripts/generate_offline_skus.py; a location the table lacks is an
  error naming the ``location`` setting;
* prices: ``data/fallback_prices.json``, the table the online provider starts from
  (spot priced as on-demand, as it has no spot prices; see :mod:`karpy_azure._pricing`);
* zones: each SKU's zones in the location, as Resource SKUs list them.

Instance types are built by the same
:func:`~karpy_azure._instancetypes.build_instance_types` as online. Nothing is ever
launched: ``create``, ``delete``, ``get`` and ``list`` raise
:class:`~karpy.cloudprovider.errors.OfflineError`, and ``karpy run`` refuses the setting.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cache
from importlib.resources import files
from typing import Any

from karpy.apis import NodeClaim, NodePool
from karpy.cloudprovider import (
    DriftReason,
    InstanceType,
    RepairPolicy,
    UnavailableOfferings,
)
from karpy.cloudprovider.errors import OfflineError
from karpy.runtime import Kind, Manager
from karpy_azure._hash import hash_drifted
from karpy_azure._instancetypes import build_instance_types, instance_type_params
from karpy_azure._nodeclasses import AKS_NODE_CLASS, NodeClassSource
from karpy_azure._pricing import fallback_prices
from karpy_azure._repair import REPAIR_POLICIES
from karpy_azure._settings import AzureSettings, AzureSettingsError
from karpy_azure._skus import Sku, parse_skus

__all__ = ["OfflineAzureCloudProvider", "offline_skus"]


@cache
def _table() -> Mapping[str, Any]:
    loaded: Mapping[str, Any] = json.loads(
        files("karpy_azure").joinpath("data/skus.json").read_text(encoding="utf-8")
    )
    return loaded


def offline_skus(location: str) -> Sequence[Sku]:
    """The shipped SKUs of ``location``; AzureSettingsError naming the ``location``
    setting when the table has none."""
    locations: Mapping[str, Any] = _table()["locations"]
    raw = locations.get(location.lower())
    if raw is None:
        raise AzureSettingsError(
            f"offline mode has no SKUs for location {location!r}: the shipped table covers "
            f"{', '.join(sorted(locations))}; set --provider-setting location=<one of them> "
            "(env LOCATION), or run online"
        )
    return parse_skus(raw, location)


class OfflineAzureCloudProvider:
    """The ``azure`` provider built with ``offline=true`` (see the module docstring)."""

    def __init__(self, settings: AzureSettings, *, node_classes: NodeClassSource) -> None:
        """Raises AzureSettingsError when the shipped tables lack the location."""
        self.settings = settings
        self.node_classes = node_classes
        self._skus = offline_skus(settings.location)
        self._prices = fallback_prices(settings.location)
        self._unavailable = UnavailableOfferings()  # stays empty: nothing is launched

    @property
    def name(self) -> str:
        """``"azure"``."""
        return "azure"

    async def get_instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        """The instance types of the NodePool's AKSNodeClass from the shipped tables
        (none while the class is missing, as online)."""
        ref = nodepool.spec.template.spec.node_class_ref
        if (ref.group, ref.kind) != (AKS_NODE_CLASS.group, AKS_NODE_CLASS.kind):
            return ()
        node_class = await self.node_classes.get(ref.name)
        if node_class is None:
            return ()
        params = instance_type_params(self.settings, node_class)
        return build_instance_types(self._skus, params, self._prices, self._unavailable)

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        raise OfflineError("azure", f"create nodeclaim {nodeclaim.metadata.name}")

    async def delete(self, nodeclaim: NodeClaim) -> None:
        which = nodeclaim.status.provider_id or nodeclaim.metadata.name
        raise OfflineError("azure", f"delete {which}")

    async def get(self, provider_id: str) -> NodeClaim:
        raise OfflineError("azure", f"read virtual machine {provider_id}")

    async def list(self) -> Sequence[NodeClaim]:
        raise OfflineError("azure", "list virtual machines")

    async def is_drifted(self, nodeclaim: NodeClaim) -> DriftReason | None:
        """NodeClassDrift from the hash annotations, as online (image drift is left to
        the online provider)."""
        node_class = await self.node_classes.get(nodeclaim.spec.node_class_ref.name)
        if node_class is None:
            return None
        if hash_drifted(nodeclaim, node_class):
            return DriftReason("NodeClassDrift")
        return None

    def repair_policies(self) -> Sequence[RepairPolicy]:
        """The online provider's: Ready False or Unknown for 10 minutes."""
        return REPAIR_POLICIES

    def supported_node_classes(self) -> Sequence[Kind]:
        """AKSNodeClass (karpenter.azure.com/v1beta1)."""
        return (AKS_NODE_CLASS,)

    def register_controllers(self, manager: Manager) -> None:
        """None: the AKSNodeClass status and NIC garbage collection call Azure."""
        del manager

    async def aclose(self) -> None:
        """Nothing to close: no client was made."""
