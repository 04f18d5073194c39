"""The cluster's Dynamic Resource Allocation objects, indexed for the simulator:
ResourceClaims, ResourceClaimTemplates, DeviceClasses and ResourceSlices
(resource.k8s.io/v1), fed by informers when IGNORE_DRA_REQUESTS is false.

Each object is parsed once, when its event arrives (:mod:`karpy.scheduling.devices`);
:meth:`DeviceIndex.inputs` hands the simulator the classes, each node's inventory and
the allocated claims, rebuilt only after a change. An object karpy cannot parse is kept
out with one log line naming its field (a claim that cannot be parsed leaves its pods
unprovisionable, with the reason on the pod).

The informers are registered only with the flag off: with Karpenter's default a cluster
without resource.k8s.io/v1 (before Kubernetes 1.34) must not wait for kinds it lacks.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from karpy.runtime import Kind
from karpy.scheduling import Pod
from karpy.scheduling.deviceallocation import Inventory
from karpy.scheduling.devices import (
    DeviceClaim,
    DeviceClass,
    DeviceError,
    ResourceSliceTemplate,
    claim_from_dict,
    claim_spec,
    class_from_dict,
    pod_claim_keys,
    slice_from_dict,
)
from karpy.scheduling.devicetracker import DeviceInputs

__all__ = [
    "DEVICE_CLASS",
    "RESOURCE_CLAIM",
    "RESOURCE_CLAIM_TEMPLATE",
    "RESOURCE_SLICE",
    "DeviceIndex",
]

log = logging.getLogger("controller")

_GROUP: Final = "resource.k8s.io"
RESOURCE_CLAIM: Final = Kind(group=_GROUP, version="v1", plural="resourceclaims",
                             kind="ResourceClaim")
RESOURCE_CLAIM_TEMPLATE: Final = Kind(group=_GROUP, version="v1",
                                      plural="resourceclaimtemplates",
                                      kind="ResourceClaimTemplate")
DEVICE_CLASS: Final = Kind(group=_GROUP, version="v1", plural="deviceclasses",
                           kind="DeviceClass", namespaced=False)
RESOURCE_SLICE: Final = Kind(group=_GROUP, version="v1", plural="resourceslices",
                             kind="ResourceSlice", namespaced=False)


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


class DeviceIndex:
    """The DRA objects (module docstring)."""

    def __init__(self) -> None:
        self._claims: dict[str, DeviceClaim | str] = {}
        self._templates: dict[str, DeviceClaim | str] = {}
        self._classes: dict[str, DeviceClass] = {}
        self._slices: dict[str, ResourceSliceTemplate] = {}
        # Per ResourceSlice: (node, driver, pool, pool generation, resourceSliceCount),
        # for the pool completeness NodeClaim initialization waits for.
        self._pools: dict[str, tuple[str, str, str, int, int]] = {}
        self._inputs: DeviceInputs | None = None

    # -- events -------------------------------------------------------------------------

    def update_claim(self, obj: Mapping[str, Any]) -> None:
        try:
            self._claims[_key(obj)] = claim_from_dict(obj)
        except DeviceError as exc:
            self._claims[_key(obj)] = str(exc)
        self._inputs = None

    def delete_claim(self, obj: Mapping[str, Any]) -> None:
        self._claims.pop(_key(obj), None)
        self._inputs = None

    def update_template(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = _key(obj)
        try:
            self._templates[key] = claim_spec(
                ((obj.get("spec") or {}).get("spec") or {}), meta.get("namespace", ""),
                meta.get("name", ""), f"ResourceClaimTemplate {key} spec.spec")
        except DeviceError as exc:
            self._templates[key] = str(exc)

    def delete_template(self, obj: Mapping[str, Any]) -> None:
        self._templates.pop(_key(obj), None)

    def update_class(self, obj: Mapping[str, Any]) -> None:
        try:
            self._classes[_key(obj)] = class_from_dict(obj)
        except DeviceError as exc:
            log.error("ignoring DeviceClass", extra={"error": str(exc)})
            self._classes.pop(_key(obj), None)
        self._inputs = None

    def delete_class(self, obj: Mapping[str, Any]) -> None:
        self._classes.pop(_key(obj), None)
        self._inputs = None

    def update_slice(self, obj: Mapping[str, Any]) -> None:
        self._pools.pop(_key(obj), None)
        spec = obj.get("spec") or {}
        pool = spec.get("pool") or {}
        # A slice is the node's by spec.nodeName or a Node owner (sliceBelongsToNode).
        owners = [r.get("name") for r in (obj.get("metadata") or {}).get("ownerReferences") or ()
                  if r.get("kind") == "Node"]
        # The API server validates these; a slice whose numbers do not read completes nothing.
        with contextlib.suppress(TypeError, ValueError):
            self._pools[_key(obj)] = (
                str(spec.get("nodeName") or (owners[0] if owners else "")),
                str(spec.get("driver") or ""),
                str(pool.get("name") or ""), int(pool.get("generation") or 0),
                int(pool.get("resourceSliceCount") or 0))
        try:
            self._slices[_key(obj)] = slice_from_dict(obj)
        except DeviceError as exc:
            log.error("ignoring ResourceSlice", extra={"error": str(exc)})
            self._slices.pop(_key(obj), None)
        self._inputs = None

    def delete_slice(self, obj: Mapping[str, Any]) -> None:
        self._slices.pop(_key(obj), None)
        self._pools.pop(_key(obj), None)
        self._inputs = None

    # -- reads --------------------------------------------------------------------------

    def has_slices(self, node: str) -> bool:
        """Whether any ResourceSlice is ``node``'s."""
        return any(on == node for on, *_ in self._pools.values())

    def drivers_on(self, node: str) -> frozenset[str]:
        """The drivers with a complete resource pool on ``node`` (``spec.nodeName``), as
        Karpenter's completePoolDrivers (v1.14.1): a pool is complete when the slices seen
        at its highest generation are as many as they declare (``resourceSliceCount``).
        NodeClaim initialization waits for the drivers it requested."""
        latest: dict[tuple[str, str], tuple[int, int, int]] = {}
        for on, driver, pool, generation, count in self._pools.values():
            if on != node:
                continue
            seen = latest.get((driver, pool))
            if seen is None or generation > seen[0]:
                latest[(driver, pool)] = (generation, count, 1)
            elif generation == seen[0]:
                latest[(driver, pool)] = (generation, seen[1], seen[2] + 1)
        return frozenset(driver for (driver, _), (_, count, observed) in latest.items()
                         if count > 0 and observed == count)

    def inputs(self) -> DeviceInputs:
        """The simulator's device inputs (rebuilt after a change)."""
        if self._inputs is None:
            by_node: dict[str, list[ResourceSliceTemplate]] = {}
            for s in self._slices.values():
                node = s.devices[0].node_name if s.devices else ""
                if node:
                    by_node.setdefault(node, []).append(s)
            self._inputs = DeviceInputs(
                classes=dict(self._classes),
                nodes={n: Inventory.of(slices) for n, slices in by_node.items()},
                allocated=tuple(c for c in self._claims.values()
                                if isinstance(c, DeviceClaim) and c.allocated),
            )
        return self._inputs

    def resolve(self, obj: Mapping[str, Any], pod: Pod) -> Pod | str:
        """``pod`` with its claims resolved, or why they cannot be yet (a claim not
        made yet: Karpenter waits for the resourceclaim controller, as here)."""
        claims = []
        for key, template, generated in pod_claim_keys(obj):
            if not generated:
                return (f"waiting for the ResourceClaim of template {template} "
                        "to be created")
            claim = self._claims.get(key)
            if claim is None:
                return f"ResourceClaim {key} not found"
            if isinstance(claim, str):
                return claim
            claims.append(claim)
        return replace(pod, device_claims=tuple(claims))
