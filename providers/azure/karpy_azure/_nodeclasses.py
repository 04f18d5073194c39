"""Where the provider reads AKSNodeClasses from: the cluster (the operator's Client) or,
for tests and library use, a fixed mapping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Protocol

from karpy.runtime import Client, Kind, thaw
from karpy.runtime import errors as api_errors
from karpy_azure.apis import AKSNodeClass
from karpy_azure.apis.labels import GROUP

__all__ = [
    "AKS_NODE_CLASS",
    "ClusterNodeClasses",
    "NodeClassSource",
    "StaticNodeClasses",
]

#: The NodeClass kind the provider serves (and reads and writes).
AKS_NODE_CLASS: Final = Kind(
    group=GROUP, version="v1beta1", plural="aksnodeclasses", kind="AKSNodeClass",
    namespaced=False,
)


class NodeClassSource(Protocol):
    """Reads AKSNodeClasses by name."""

    async def get(self, name: str) -> AKSNodeClass | None:
        """The AKSNodeClass ``name``, or None when there is none."""
        ...


class ClusterNodeClasses:
    """AKSNodeClasses read through a karpy.runtime Client (the manager's cache when it
    holds them)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    async def get(self, name: str) -> AKSNodeClass | None:
        try:
            obj = await self._client.get(AKS_NODE_CLASS, name)
        except api_errors.NotFound:
            return None
        return AKSNodeClass.model_validate(thaw(obj))


class StaticNodeClasses:
    """A fixed set of AKSNodeClasses (tests, library use). It does not watch anything:
    replace ``items`` to change what it returns."""

    def __init__(self, items: Mapping[str, AKSNodeClass]) -> None:
        self.items = dict(items)

    async def get(self, name: str) -> AKSNodeClass | None:
        return self.items.get(name)
