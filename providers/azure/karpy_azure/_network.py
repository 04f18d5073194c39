"""What a node's NIC joins besides its subnet: the AKS load balancers' backend pools and,
on a bring-your-own VNet, AKS's managed network security group — as Karpenter's Azure
provider does (its ``pkg/providers/loadbalancer`` and ``networksecuritygroup``).

Why: with AKS's default ``outboundType: loadBalancer`` a node's only egress is the
outbound rule of the ``kubernetes`` load balancer, which serves the NICs in its
``aksOutboundBackendPool``; a NIC in no pool cannot reach the API server or a registry,
and the node never joins. On the AKS-managed VNet (``aks-vnet-<8 digits>/aks-subnet`` in
the node resource group) the managed NSG is on the subnet already; on any other subnet
it must be on the NIC.

- :class:`BackendPools` lists the node resource group's load balancers ``kubernetes`` and
  ``kubernetes-internal`` (the latter exists once a Service asked for an internal load
  balancer) and keeps their IPv4 pool IDs for two hours: a new internal load balancer
  is picked up within that time (until then the cloud provider adds new nodes itself).
  IPv6 pools and IP-based pools (NodeIP mode) are skipped. When ARM refuses a NIC
  because a submitted pool no longer exists (``InvalidResourceReference`` naming it),
  :meth:`BackendPools.refresh` re-reads them once for every caller that saw the stale
  list (a generation number keeps concurrent callers from re-reading twice).
- :class:`ManagedNsg` finds ``aks-agentpool-<id>-nsg`` in the node resource group once
  (its name also goes to the node's cloud provider config; its number names the route
  table).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from azure.core.exceptions import HttpResponseError
from azure.mgmt.network.aio import NetworkManagementClient

from karpy.cloudprovider import CreateError
from karpy_azure._arm import error_code

__all__ = [
    "BACKEND_POOLS_TTL",
    "MANAGED_NSG",
    "BackendPools",
    "ManagedNsg",
    "Nsg",
    "PoolIDs",
    "is_aks_managed_vnet",
    "is_missing_backend_pool",
]

LB_NAME: Final = "kubernetes"
INTERNAL_LB_NAME: Final = "kubernetes-internal"
_IPV6_POOLS: Final = frozenset({"aksoutboundbackendpool-ipv6", "kubernetes-ipv6"})
#: how long the load balancers' pools are served from the cache (Karpenter-Azure's TTL)
BACKEND_POOLS_TTL: Final = 2 * 3600.0
INVALID_RESOURCE_REFERENCE: Final = "InvalidResourceReference"

#: AKS's managed network security group in the node resource group; its number is the
#: cluster's ID, which names the route table too.
MANAGED_NSG: Final = re.compile(r"(?i)^aks-agentpool-(\d{8})-nsg$")
_MANAGED_VNET: Final = re.compile(r"(?i)^aks-vnet-\d{8}$")
_MANAGED_SUBNET: Final = "aks-subnet"


def is_aks_managed_vnet(node_resource_group: str, subnet_id: str) -> bool:
    """True when ``subnet_id`` is the AKS-managed VNet's subnet: ``aks-vnet-<8 digits>/
    aks-subnet`` in the node resource group (whose NSG AKS put on the subnet)."""
    parts = subnet_id.strip("/").split("/")
    if len(parts) != 10:
        return False
    rg, vnet, subnet = parts[3], parts[7], parts[9]
    return (
        bool(_MANAGED_VNET.match(vnet))
        and rg.lower() == node_resource_group.lower()
        and subnet.lower() == _MANAGED_SUBNET
    )


@dataclass(frozen=True, slots=True)
class PoolIDs:
    """The IPv4 backend pool IDs a NIC joins, and the cache generation they came from."""

    ipv4: tuple[str, ...]
    generation: int


def is_missing_backend_pool(exc: HttpResponseError, pools: PoolIDs) -> bool:
    """True when ARM refused a NIC because one of ``pools`` does not exist (and not, say,
    because its subnet or NSG does not)."""
    if error_code(exc).lower() != INVALID_RESOURCE_REFERENCE.lower():
        return False
    message = str(exc.message or exc).lower()
    return any(pool.lower() in message for pool in pools.ipv4)


class BackendPools:
    """The AKS load balancers' backend pools, cached (see the module docstring)."""

    def __init__(
        self,
        network: NetworkManagementClient,
        resource_group: str,
        *,
        ttl: float = BACKEND_POOLS_TTL,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._network = network
        self._resource_group = resource_group
        self._ttl = ttl
        self._monotonic = monotonic
        self._lock = asyncio.Lock()
        self._cached: tuple[float, tuple[str, ...]] | None = None
        self._generation = 0

    async def get(self) -> PoolIDs:
        """The pools, from the cache while it is fresh."""
        async with self._lock:
            return await self._get_locked()

    async def refresh(self, observed: PoolIDs) -> PoolIDs:
        """Re-read the pools if ``observed`` is what the cache still holds; else (someone
        re-read them meanwhile) the newer ones."""
        async with self._lock:
            if observed.generation == self._generation:
                self._cached = None
            return await self._get_locked()

    async def _get_locked(self) -> PoolIDs:
        now = self._monotonic()
        if self._cached is None or now - self._cached[0] >= self._ttl:
            self._cached = (now, await self._load())
            self._generation += 1
        return PoolIDs(self._cached[1], self._generation)

    async def _load(self) -> tuple[str, ...]:
        rg = self._resource_group
        try:
            lbs = [lb async for lb in self._network.load_balancers.list(rg)]
        except HttpResponseError as exc:
            raise CreateError(
                f"listing load balancers of {rg} failed: "
                f"{error_code(exc) or exc.status_code}: {exc.message}",
                reason="LoadBalancerListFailed",
            ) from exc
        found: list[str] = []
        for lb in lbs:
            if str(lb.name or "").lower() not in (LB_NAME, INTERNAL_LB_NAME):
                continue
            props = lb.properties
            for pool in (props.backend_address_pools if props else None) or ():
                if _applicable(pool) and pool.id:
                    found.append(str(pool.id))
        return tuple(found)


def _applicable(pool: object) -> bool:
    """An IPv4 pool of NICs: not a well-known IPv6 pool, not an IP-based pool (NodeIP
    mode lists addresses, which the cloud provider fills in itself)."""
    name = str(getattr(pool, "name", "") or "")
    props = getattr(pool, "properties", None)
    if not name or props is None or name.lower() in _IPV6_POOLS:
        return False
    addresses: Sequence[object] = getattr(props, "load_balancer_backend_addresses", None) or ()
    for address in addresses:
        address_props = getattr(address, "properties", None)
        if address_props is not None and getattr(address_props, "ip_address", None):
            return False
    return True


@dataclass(frozen=True, slots=True)
class Nsg:
    """A network security group's name and resource ID."""

    name: str
    id: str


class ManagedNsg:
    """AKS's managed NSG of the node resource group, looked up once."""

    def __init__(self, network: NetworkManagementClient, resource_group: str) -> None:
        self._network = network
        self._resource_group = resource_group
        self._lock = asyncio.Lock()
        self._found: Nsg | None = None

    async def get(self) -> Nsg:
        """The managed NSG; CreateError (``NetworkSecurityGroupNotFound``) when there is
        none or more than one, as Karpenter's Azure provider refuses to launch then."""
        async with self._lock:
            if self._found is None:
                self._found = await self._load()
            return self._found

    async def _load(self) -> Nsg:
        rg = self._resource_group
        try:
            found = [
                Nsg(str(nsg.name), str(nsg.id or ""))
                async for nsg in self._network.network_security_groups.list(rg)
                if MANAGED_NSG.match(str(nsg.name or ""))
            ]
        except HttpResponseError as exc:
            raise CreateError(
                f"listing network security groups of {rg} failed: "
                f"{error_code(exc) or exc.status_code}: {exc.message}",
                reason="NetworkSecurityGroupNotFound",
            ) from exc
        if len(found) != 1:
            raise CreateError(
                f"expected one AKS managed network security group (aks-agentpool-<id>-nsg) "
                f"in {rg}, found {[n.name for n in found] or 'none'}",
                reason="NetworkSecurityGroupNotFound",
            )
        return found[0]
