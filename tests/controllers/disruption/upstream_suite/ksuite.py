"""The set-up Karpenter's disruption suite (pkg/controllers/disruption/suite_test.go)
gives every case — its fake catalogue (``InstanceTypesAssorted``), NodePools that
disrupt at once with a 100 % budget — over karpy's disruption unit-test scene; each
ported case decides with the real disruption methods (:func:`decide`), unvalidated as
in Karpenter's suite, which runs its methods with a no-op validator."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from controllers.disruption.disruption_support import Scene, SceneController, decide
from upstream_fake import (
    LEAST_EXPENSIVE,
    LEAST_EXPENSIVE_SPOT,
    MOST_EXPENSIVE,
    MOST_EXPENSIVE_SPOT,
    instance_types_assorted,
)

from karpy.scheduling import InstanceType

__all__ = [
    "LEAST_EXPENSIVE",
    "LEAST_EXPENSIVE_SPOT",
    "MOST_EXPENSIVE",
    "MOST_EXPENSIVE_SPOT",
    "Scene",
    "SceneController",
    "decide",
    "karpenter_scene",
    "machine",
    "names",
]


@cache
def _assorted() -> tuple[InstanceType, ...]:
    return tuple(instance_types_assorted())


def karpenter_scene(
    *, policy: str = "WhenEmptyOrUnderutilized", budgets: list[dict[str, Any]] | None = None,
    consolidate_after: str = "0s", types: list[InstanceType] | None = None,
    pool: str = "default", requirements: list[dict[str, Any]] | None = None,
) -> Scene:
    """A scene over Karpenter's fake catalogue with one NodePool as the suite's
    BeforeEach makes it ("Disrupt away!": budget 100 %, consolidateAfter 0s)."""
    scene = Scene(types=list(types if types is not None else _assorted()))
    scene.pool(pool, consolidateAfter=consolidate_after, consolidationPolicy=policy,
               budgets=budgets if budgets is not None else [{"nodes": "100%"}],
               requirements=requirements or ())
    return scene


def machine(scene: Scene, name: str, type_name: str, **kwargs: Any) -> None:
    """A machine of an assorted type, labelled with its offering's zone and capacity
    type (as the suite labels its NodeClaims from the offering)."""
    zone = re.search(r"test-zone-\d", type_name)
    capacity_type = "on-demand" if type_name.endswith("on-demand") else "spot"
    kwargs.setdefault("zone", zone.group(0) if zone else "test-zone-1")
    kwargs.setdefault("capacity_type", capacity_type)
    scene.machine(name, type_name, **kwargs)


def names(commands: list[Any]) -> list[tuple[str, str, list[str], int]]:
    """Each command as (reason, decision, candidate names, replacement count)."""
    return [
        (c.reason, str(c.decision), sorted(x.name for x in c.candidates), len(c.replacements))
        for c in commands
    ]
