"""A minimal third-party cloud provider for karpy, backed by an in-memory "cloud".

It uses only karpy's public API (``karpy.cloudprovider``, ``karpy.scheduling``,
``karpy.apis``) and shows the parts every provider has: a catalogue of instance types
with offerings, ``create`` choosing the cheapest fitting offering, a two-phase
``delete`` (the first call starts termination, later calls raise
NodeClaimNotFoundError), ``get``/``list``, and the ``from_context`` factory named by the
``karpy.cloudproviders`` entry point in pyproject.toml.

Settings (``ProviderContext.settings``): ``zones``, a comma-separated list of zones to
offer (default ``example-1a,example-1b``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from karpy.apis import NodeClaim, NodePool
from karpy.cloudprovider import (
    DriftReason,
    InstanceType,
    NodeClaimNotFoundError,
    Offering,
    Overhead,
    ProviderContext,
    RepairPolicy,
)
from karpy.cloudprovider.launch import choose_launch, launched_nodeclaim
from karpy.runtime import Kind
from karpy.scheduling import resources as res

__all__ = ["EXAMPLE_NODE_CLASS", "ExampleCloudProvider", "catalogue"]

EXAMPLE_NODE_CLASS = Kind(
    group="example.karpy.dev", version="v1", kind="ExampleNodeClass", plural="examplenodeclasses",
    namespaced=False,
)
GIB = 2**30


def catalogue(zones: Sequence[str]) -> list[InstanceType]:
    """Three instance types, each sold on-demand and (cheaper) spot in every zone."""
    shapes = {"ex.small": (2, 4), "ex.medium": (4, 16), "ex.large": (16, 64)}
    types = []
    for name, (cpu, gib) in shapes.items():
        price = 0.02 * cpu + 0.005 * gib
        types.append(
            InstanceType.build(
                name,
                capacity={res.CPU: cpu * 1000, res.MEMORY: gib * GIB, res.PODS: 58},
                offerings=[
                    Offering(zone=z, capacity_type=ct, price=price * (0.6 if ct == "spot" else 1))
                    for z in zones
                    for ct in ("on-demand", "spot")
                ],
                overhead=Overhead(
                    kube_reserved={res.CPU: 80, res.MEMORY: 256 * 2**20},
                    eviction_threshold={res.MEMORY: 100 * 2**20},
                ),
            )
        )
    return types


@dataclass
class _Instance:
    nodeclaim: NodeClaim
    terminating: bool = False


class ExampleCloudProvider:
    """The provider. ``instances`` is the whole "cloud": provider ID -> instance."""

    def __init__(self, *, zones: Sequence[str] = ("example-1a", "example-1b")) -> None:
        self._types = catalogue(zones)
        self._ids = itertools.count(1)
        self.instances: dict[str, _Instance] = {}

    @classmethod
    def from_context(cls, context: ProviderContext) -> ExampleCloudProvider:
        """The factory karpy calls (via the entry point) with the operator's context."""
        unknown = set(context.settings) - {"zones"}
        if unknown:
            raise ValueError(f"unknown example provider settings: {sorted(unknown)}")
        zones = [z.strip() for z in context.settings.get("zones", "").split(",") if z.strip()]
        return cls(zones=zones) if zones else cls()

    @property
    def name(self) -> str:
        return "example"

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        # raises InsufficientCapacityError when nothing fits, as the protocol asks
        choice = choose_launch(nodeclaim, self._types)
        provider_id = f"example:///{choice.offering.zone}/i-{next(self._ids):08x}"
        launched = launched_nodeclaim(nodeclaim, choice, provider_id=provider_id)
        self.instances[provider_id] = _Instance(launched)
        return launched.model_copy(deep=True)

    async def delete(self, nodeclaim: NodeClaim) -> None:
        provider_id = nodeclaim.status.provider_id or ""
        instance = self.instances.get(provider_id)
        if instance is None:
            raise NodeClaimNotFoundError(f"instance {provider_id} not found")
        if instance.terminating:
            # a real cloud finishes terminating some time later; here, at the next call
            del self.instances[provider_id]
            raise NodeClaimNotFoundError(f"instance {provider_id} terminated")
        instance.terminating = True

    async def get(self, provider_id: str) -> NodeClaim:
        instance = self.instances.get(provider_id)
        if instance is None or instance.terminating:
            raise NodeClaimNotFoundError(f"instance {provider_id} not found")
        return instance.nodeclaim.model_copy(deep=True)

    async def list(self) -> Sequence[NodeClaim]:
        return [
            i.nodeclaim.model_copy(deep=True) for i in self.instances.values() if not i.terminating
        ]

    async def get_instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        return self._types

    async def is_drifted(self, nodeclaim: NodeClaim) -> DriftReason | None:
        return None

    def repair_policies(self) -> Sequence[RepairPolicy]:
        return (RepairPolicy("Ready", "False", timedelta(minutes=15)),)

    def supported_node_classes(self) -> Sequence[Kind]:
        return (EXAMPLE_NODE_CLASS,)
