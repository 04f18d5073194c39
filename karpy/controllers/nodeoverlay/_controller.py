"""The reconciler: evaluate every overlay, put the applicable ones in force, write the
conditions (see the package docstring)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from karpy.apis.core import ObjectMeta
from karpy.apis.model import validation_problems
from karpy.apis.v1alpha1 import (
    CONDITION_VALIDATION_SUCCEEDED,
    REASON_CONFLICT,
    REASON_RUNTIME_VALIDATION,
    RESTRICTED_CAPACITY,
    NodeOverlay,
    NodeOverlayStatus,
)
from karpy.controllers.inputs.instancetypes import InstanceTypeCache
from karpy.runtime import Cache, Client, Clock, Request, Result, errors
from karpy.scheduling.overlay import Overlay, PoolTypes, evaluate
from karpy.state import Cluster, OverlayStore
from karpy.state.kinds import NODE_OVERLAY

__all__ = ["RESYNC", "NodeOverlayController", "Verdict", "judge", "runtime_problems"]

log = logging.getLogger("controller")

RESYNC = 300.0
"""Seconds between evaluations without an event: the catalogues an overlay is judged
against change with the provider's prices and offerings (the instance-type cache's
refresh period)."""


def runtime_problems(overlay: NodeOverlay) -> list[str]:
    """What the CRD cannot check (Karpenter's RuntimeValidate), in its words."""
    problems = [
        f"invalid capacity: {name} in resource, restricted"
        for name in sorted(overlay.spec.capacity)
        if name in RESTRICTED_CAPACITY
    ]
    for r in overlay.spec.requirements:
        if r.operator == "NotIn" and not r.values:
            problems.append(f"key {r.key} with operator {r.operator} must have a value defined")
    return problems


@dataclass(frozen=True, slots=True)
class Verdict:
    """What :func:`judge` found."""

    applied: list[Overlay]
    """The overlays in force, in precedence order."""
    conflicts: dict[str, str]
    """Overlays not applied for a conflict: name -> message."""
    problems: dict[str, str]
    """Overlays not applied for what their schema cannot check: name -> message."""
    models: dict[str, NodeOverlay]
    """The overlays that parse, by name."""
    evaluated: list[str]
    """The NodePools judged (those whose instance types could be listed)."""
    unlisted: list[str]
    """Valid NodePools whose instance types could not be listed (judged again soon)."""


async def judge(
    overlays: Iterable[Mapping[str, Any]], cluster: Cluster, instance_types: InstanceTypeCache
) -> Verdict:
    """Judge NodeOverlay objects against every valid NodePool's catalogue (the
    provider's instance types before overlays). A NodePool whose instance types cannot
    be listed is left out rather than holding the others back."""
    problems: dict[str, str] = {}
    parsed: list[Overlay] = []
    models: dict[str, NodeOverlay] = {}
    for stored in overlays:
        name = str(stored["metadata"]["name"])
        try:
            model = NodeOverlay.from_dict(stored)
        except ValidationError as exc:
            problems[name] = "; ".join(validation_problems(exc))
            continue
        models[name] = model
        found = runtime_problems(model)
        if not found:
            try:
                parsed.append(Overlay.from_model(model))
            except ValueError as err:
                found = [str(err)]
        if found:
            problems[name] = "; ".join(found)
    pools = []
    unlisted = []
    for entry in cluster.nodepools():
        if entry.model is None:
            continue
        try:
            types = await instance_types.raw(entry)
        except Exception as err:  # a broken NodePool must not hold the others back
            log.warning(
                "listing instance types for nodepool",
                extra={"NodePool": {"name": entry.name}, "error": str(err)},
            )
            unlisted.append(entry.name)
            continue
        labels = entry.model.spec.template.metadata.labels
        pools.append(PoolTypes(entry.name, labels, types))
    applied, conflicts = evaluate(parsed, pools)
    return Verdict(
        applied, conflicts, problems, models, [p.nodepool for p in pools], unlisted
    )


class NodeOverlayController:
    """The ``nodeoverlay.controller`` reconciler."""

    name = "nodeoverlay.controller"

    def __init__(
        self,
        *,
        client: Client,
        index: Cache,
        cluster: Cluster,
        store: OverlayStore,
        instance_types: InstanceTypeCache,
        on_change: Callable[[object], None],
        clock: Clock,
    ) -> None:
        self._client = client
        self._index = index
        self._cluster = cluster
        self._store = store
        self._instance_types = instance_types
        self._on_change = on_change
        self._clock = clock

    async def reconcile(self, request: Request) -> Result:
        """Judge all overlays at once; the request only says that something changed."""
        stored_overlays = self._index.list(NODE_OVERLAY)
        verdict = await judge(stored_overlays, self._cluster, self._instance_types)
        if self._store.update(verdict.applied, verdict.evaluated):
            log.info(
                "updated nodeoverlays in force",
                extra={
                    "applied": [o.name for o in verdict.applied],
                    "conflicts": sorted(verdict.conflicts),
                },
            )
            self._on_change("nodeoverlay")
        requeue = False
        for raw in stored_overlays:
            name = str(raw["metadata"]["name"])
            if name in verdict.problems:
                outcome = ("False", REASON_RUNTIME_VALIDATION, verdict.problems[name])
            elif name in verdict.conflicts:
                outcome = ("False", REASON_CONFLICT, verdict.conflicts[name])
            else:
                outcome = ("True", "", "")
            requeue |= await self._write(raw, verdict.models.get(name), outcome)
        if requeue or verdict.unlisted:
            # a status write raced, or a NodePool (its NodeClass not ready, a cloud
            # hiccup) could not be judged: again, with the controller's backoff
            return Result(requeue=True)
        return Result(requeue_after=RESYNC)

    async def _write(
        self,
        stored: Mapping[str, Any],
        model: NodeOverlay | None,
        verdict: tuple[str, str, str],
    ) -> bool:
        """Write the overlay's conditions if they changed; returns whether to requeue
        (it changed meanwhile)."""
        status = NodeOverlayStatus.from_dict(stored.get("status") or {})
        # An overlay that does not parse still gets its conditions written (no spec).
        fields: dict[str, Any] = {
            "metadata": ObjectMeta.from_dict(stored.get("metadata") or {}),
            "status": status,
        }
        overlay = model or NodeOverlay.model_construct(**fields)
        conditions = overlay.status_conditions(
            now=lambda: self._clock.now().replace(microsecond=0)
        )
        value, reason, message = verdict
        if value == "True":
            conditions.set_true(CONDITION_VALIDATION_SUCCEEDED)
        else:
            conditions.set_false(CONDITION_VALIDATION_SUCCEEDED, reason, message)
        if overlay.status.conditions == status.conditions:
            return False
        meta = stored["metadata"]
        try:
            await self._client.patch_status(
                NODE_OVERLAY,
                meta["name"],
                {
                    "metadata": {"resourceVersion": meta.get("resourceVersion")},
                    "status": {"conditions": [c.to_dict() for c in overlay.status.conditions]},
                },
            )
        except errors.NotFound:
            return False
        except errors.Conflict:
            return True
        return False
