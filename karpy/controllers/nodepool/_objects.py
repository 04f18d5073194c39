"""What the NodePool controllers share: which NodePools are this provider's, and the
optimistic-lock write of a NodePool's conditions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from karpy.apis import NodePool
from karpy.apis.core import ObjectMeta
from karpy.apis.model import validation_problems
from karpy.apis.v1.nodepool import NodePoolStatus
from karpy.cloudprovider import CloudProvider
from karpy.cloudprovider.nodeclass import resolve_node_class
from karpy.controllers.indexes import index_nodepool_label
from karpy.runtime import Client, Kind, Object, Request, Result, errors
from karpy.state.kinds import NODE_POOL

__all__ = [
    "get_managed",
    "managed_node_class",
    "nodepool_of",
    "parse_nodepool",
    "patch_conditions",
    "write_conditions",
]

def _ref(nodepool: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = ((nodepool.get("spec") or {}).get("template") or {}).get("spec") or {}
    return spec.get("nodeClassRef") or {}


def managed_node_class(
    nodepool: Mapping[str, Any], provider: CloudProvider
) -> tuple[Kind, str] | None:
    """The provider's NodeClass kind and the object name the NodePool refers to, or
    None when the NodePool is another provider's (then every NodePool controller
    leaves it alone, as Karpenter's IsManaged does)."""
    ref = _ref(nodepool)
    kind = resolve_node_class(
        str(ref.get("group", "")), str(ref.get("kind", "")), provider.supported_node_classes()
    )
    return None if kind is None else (kind, str(ref.get("name", "")))


def nodepool_of(obj: Object) -> Iterable[Request]:
    """The NodePool a Node or NodeClaim belongs to (by its label)."""
    return [Request("", pool) for pool in index_nodepool_label(obj)]


async def get_managed(
    client: Client, provider: CloudProvider, name: str
) -> tuple[Object, tuple[Kind, str]] | None:
    """The NodePool ``name`` and its NodeClass (kind, object name), or None when the
    NodePool is gone or is another provider's (nothing to do then)."""
    try:
        stored = await client.get(NODE_POOL, name)
    except errors.NotFound:
        return None
    node_class = managed_node_class(stored, provider)
    return None if node_class is None else (stored, node_class)


def parse_nodepool(stored: Mapping[str, Any]) -> tuple[NodePool, list[str]]:
    """The NodePool's model and, when the object does not validate, why (one line per
    field, e.g. a duration beyond Go's limit that the CRD's pattern let through).

    An invalid NodePool's model carries only its metadata and status: enough to write
    its conditions, nothing to act on.
    """
    try:
        return NodePool.from_dict(stored), []
    except ValidationError as exc:
        # No spec: nothing may act on it by mistake (reading it raises AttributeError).
        fields: dict[str, Any] = {
            "metadata": ObjectMeta.from_dict(stored.get("metadata") or {}),
            "status": NodePoolStatus.from_dict(stored.get("status") or {}),
        }
        return NodePool.model_construct(**fields), validation_problems(exc)


async def write_conditions(client: Client, stored: Mapping[str, Any], nodepool: NodePool) -> Result:
    """:func:`patch_conditions` as a reconcile's outcome: done when the NodePool is gone
    meanwhile, requeued when it changed (a conflict)."""
    try:
        await patch_conditions(client, stored, nodepool)
    except errors.NotFound:
        return Result()
    except errors.Conflict:
        return Result(requeue=True)
    return Result()


async def patch_conditions(client: Client, stored: Mapping[str, Any], nodepool: NodePool) -> bool:
    """Write ``nodepool``'s conditions if they changed since ``stored`` (with its
    resourceVersion as an optimistic lock: ``errors.Conflict`` if it moved on).
    Returns whether a write was made."""
    before = NodePoolStatus.from_dict(stored.get("status") or {}).conditions
    if before == nodepool.status.conditions:
        return False
    meta = stored["metadata"]
    await client.patch_status(NODE_POOL, meta["name"], {
        "metadata": {"resourceVersion": meta.get("resourceVersion")},
        "status": {"conditions": [c.to_dict() for c in nodepool.status.conditions]},
    })
    return True
