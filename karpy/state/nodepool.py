"""A NodePool as the cluster model keeps it: the cached object and its parsed model."""

from __future__ import annotations

from dataclasses import dataclass

from karpy.apis import NodePool
from karpy.apis.conditions import condition_is_true
from karpy.runtime import Object

__all__ = ["NodePoolEntry"]


@dataclass(frozen=True, slots=True)
class NodePoolEntry:
    """A NodePool as the model keeps it: the cached object and its parsed model.

    ``model`` is None when the object does not validate (``error`` says why); such a
    pool is never provisioned from.
    """

    raw: Object
    model: NodePool | None
    error: str | None

    @property
    def name(self) -> str:
        """The NodePool's name."""
        return str(self.raw["metadata"]["name"])

    @property
    def uid(self) -> str:
        """The NodePool's uid (for owner references)."""
        return str(self.raw["metadata"].get("uid") or "")

    @property
    def generation(self) -> int:
        """metadata.generation: changes with the spec, not the status."""
        return int(self.raw["metadata"].get("generation") or 0)

    @property
    def weight(self) -> int:
        """spec.weight (unset counts as 0)."""
        return int((self.raw.get("spec") or {}).get("weight") or 0)

    @property
    def replicas(self) -> int | None:
        """spec.replicas: set on a static NodePool (StaticCapacity), None otherwise."""
        replicas = (self.raw.get("spec") or {}).get("replicas")
        return None if replicas is None else int(replicas)

    @property
    def ready(self) -> bool:
        """status.conditions Ready=True (its NodeClass is ready and it validated)."""
        return condition_is_true(self.raw, "Ready")

    @property
    def deleting(self) -> bool:
        """Has a deletionTimestamp."""
        return bool(self.raw["metadata"].get("deletionTimestamp"))
