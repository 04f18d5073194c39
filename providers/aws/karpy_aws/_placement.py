"""The placement group an EC2NodeClass's ``placementGroupSelector`` names, as Karpenter
AWS resolves it (pkg/providers/placementgroup): DescribePlacementGroups by ID or by
name, only groups in state ``available``, the answer cached for a minute.

The status controller reports the outcome as the ``PlacementGroupReady`` condition (not
Ready while the group is not found, so nothing launches outside the group the user
asked for); the launch template then carries ``Placement.GroupId``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from karpy_aws._clients import AWSClients
from karpy_aws.apis.ec2nodeclass import EC2NodeClass, PlacementGroupSelector

__all__ = ["PLACEMENT_GROUP_TTL", "PlacementGroup", "PlacementGroups", "describe_placement_group"]

PLACEMENT_GROUP_TTL: Final = 60.0
"""Seconds a resolved placement group is reused before it is described again."""


@dataclass(frozen=True, slots=True)
class PlacementGroup:
    """A resolved placement group."""

    id: str
    name: str
    strategy: str
    partition_count: int = 0


def selector_text(selector: PlacementGroupSelector) -> str:
    """How the selector names its group, for messages."""
    return f"id {selector.id!r}" if selector.id else f"name {selector.name!r}"


async def describe_placement_group(
    clients: AWSClients, selector: PlacementGroupSelector
) -> PlacementGroup | None:
    """The available placement group ``selector`` names, or None if there is none."""
    kwargs: dict[str, object] = {"Filters": [{"Name": "state", "Values": ["available"]}]}
    if selector.id:
        kwargs["GroupIds"] = [selector.id]
    else:
        kwargs["GroupNames"] = [selector.name]
    try:
        answer = await clients.ec2.describe_placement_groups(**kwargs)
    except Exception as exc:
        # EC2 answers an unknown name or ID with an error rather than an empty list
        code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
        if code in (
            "InvalidPlacementGroup.Unknown",
            "InvalidPlacementGroupId.NotFound",
            "InvalidPlacementGroupId.Malformed",
        ):
            return None
        raise
    groups = answer.get("PlacementGroups") or []
    if not groups:
        return None
    group = groups[0]
    return PlacementGroup(
        id=str(group.get("GroupId", "")),
        name=str(group.get("GroupName", "")),
        strategy=str(group.get("Strategy", "")),
        partition_count=int(group.get("PartitionCount", 0) or 0),
    )


class PlacementGroups:
    """Resolves and caches (for :data:`PLACEMENT_GROUP_TTL`) a class's placement group."""

    def __init__(
        self, clients: AWSClients, *, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._clients = clients
        self._now = monotonic
        self._cache: dict[tuple[str | None, str | None], tuple[float, PlacementGroup | None]] = {}

    async def get(self, node_class: EC2NodeClass) -> PlacementGroup | None:
        """The class's placement group; None when it names none (or it is not found:
        the status controller has then made the class not Ready)."""
        selector = node_class.spec.placement_group_selector
        if selector is None:
            return None
        key = (selector.id, selector.name)
        cached = self._cache.get(key)
        if cached is not None and self._now() - cached[0] < PLACEMENT_GROUP_TTL:
            return cached[1]
        group = await describe_placement_group(self._clients, selector)
        self._cache[key] = (self._now(), group)
        return group
