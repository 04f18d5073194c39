"""Test aids for the NodeClaim controllers: an in-memory stand-in for the API server's
object store, and builders for NodeClaims and Nodes.

:class:`FakeKube` does what the controllers rely on and no more: get/list/create/
merge-patch/status-patch/delete of plain dicts, resourceVersions that change on every
write (a stale one in a patch raises Conflict), finalizers that hold a deleted object
with a deletionTimestamp, the status subresource kept apart from the main resource, and
``by_index`` lookups by providerID. It does not watch, validate schemas, or run
admission — the cluster tests cover that against a real API server.
"""

from __future__ import annotations

import copy
import itertools
import uuid
from collections.abc import Mapping
from typing import Any

from karpy.apis.annotations import FINALIZER_TERMINATION
from karpy.apis.labels import LABEL_NODEPOOL
from karpy.apis.taints import UNREGISTERED_NO_EXECUTE_TAINT
from karpy.controllers.indexes import INDEX_PROVIDER_ID
from karpy.runtime import Kind, PatchType, errors, freeze
from karpy.runtime.testing import FakeClock
from karpy.state.kinds import NODE_CLAIM

__all__ = ["FakeKube", "apply_merge_patch", "node_manifest", "nodeclaim_manifest"]


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: the result of applying ``patch`` to ``target``."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


def _stamp(clock: FakeClock) -> str:
    return clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeKube:
    """In-memory objects keyed by (kind, namespace, name); see the module docstring."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._versions = itertools.count(1)
        self.patches: list[tuple[str, str, str, Any]] = []
        self.deletes: list[tuple[str, str]] = []
        self.live_lists = 0

    # -- helpers ---------------------------------------------------------------------

    @staticmethod
    def _key(kind: Kind, name: str, namespace: str | None) -> tuple[str, str, str]:
        return (str(kind), (namespace or "") if kind.namespaced else "", name)

    def _bump(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self._versions))

    def stored(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any]:
        """The stored object itself (raises KeyError if absent)."""
        return self.objects[self._key(kind, name, namespace)]

    def exists(self, kind: Kind, name: str, namespace: str | None = None) -> bool:
        return self._key(kind, name, namespace) in self.objects

    def all(self, kind: Kind) -> list[dict[str, Any]]:
        return [o for (k, _, _), o in self.objects.items() if k == str(kind)]

    # -- the client surface ------------------------------------------------------------

    async def get(
        self, kind: Kind, name: str, *, namespace: str | None = None, live: bool = False,
        **_: Any,
    ) -> dict[str, Any]:
        obj = self.objects.get(self._key(kind, name, namespace))
        if obj is None:
            raise errors.NotFound(f'{kind.plural} "{name}" not found', reason="NotFound")
        return freeze(copy.deepcopy(obj))  # type: ignore[no-any-return]

    async def list(
        self, kind: Kind, *, namespace: str | None = None, label_selector: Any = None,
        field_selector: str | None = None, live: bool = False, **_: Any,
    ) -> list[dict[str, Any]]:
        if live:
            self.live_lists += 1
        return [freeze(copy.deepcopy(o)) for o in self.all(kind)]

    async def create(
        self, kind: Kind, obj: Mapping[str, Any], *, namespace: str | None = None, **_: Any
    ) -> dict[str, Any]:
        new = copy.deepcopy(dict(obj))
        meta = new.setdefault("metadata", {})
        if not meta.get("name"):
            meta["name"] = meta.get("generateName", "obj-") + uuid.uuid4().hex[:5]
        if kind.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        key = self._key(kind, meta["name"], meta.get("namespace"))
        if key in self.objects:
            raise errors.AlreadyExists(
                f'{kind.plural} "{meta["name"]}" exists', reason="AlreadyExists"
            )
        new.setdefault("apiVersion", kind.api_version)
        new.setdefault("kind", kind.kind)
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _stamp(self.clock))
        meta.setdefault("generation", 1)
        self._bump(new)
        self.objects[key] = new
        return copy.deepcopy(new)

    async def patch(
        self, kind: Kind, name: str, patch: Any, *, namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE, subresource: str = "", **_: Any,
    ) -> dict[str, Any]:
        assert patch_type is PatchType.MERGE, "the fake speaks merge patches only"
        key = self._key(kind, name, namespace)
        obj = self.objects.get(key)
        if obj is None:
            raise errors.NotFound(f'{kind.plural} "{name}" not found', reason="NotFound")
        self.patches.append((str(kind), name, subresource, copy.deepcopy(patch)))
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != obj["metadata"]["resourceVersion"]:
            raise errors.Conflict(f'{kind.plural} "{name}": the object has been modified',
                                  reason="Conflict")
        if subresource == "status":
            patched = dict(obj)
            patched["status"] = apply_merge_patch(obj.get("status"), patch.get("status") or {})
        else:
            body = copy.deepcopy({k: v for k, v in patch.items() if k != "status"})
            body.get("metadata", {}).pop("resourceVersion", None)
            patched = apply_merge_patch(obj, body)
            if "status" in obj:
                patched["status"] = obj["status"]
        self._bump(patched)
        self.objects[key] = patched
        meta = patched["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            del self.objects[key]
        return copy.deepcopy(patched)

    async def patch_status(
        self, kind: Kind, name: str, patch: Any, *, namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE, **_: Any,
    ) -> dict[str, Any]:
        return await self.patch(kind, name, patch, namespace=namespace, patch_type=patch_type,
                                subresource="status")

    async def delete(
        self, kind: Kind, name: str, *, namespace: str | None = None, uid: str | None = None,
        **_: Any,
    ) -> dict[str, Any] | None:
        key = self._key(kind, name, namespace)
        obj = self.objects.get(key)
        if obj is None:
            raise errors.NotFound(f'{kind.plural} "{name}" not found', reason="NotFound")
        if uid is not None and obj["metadata"].get("uid") != uid:
            raise errors.Conflict("Precondition failed: UID mismatch", reason="Conflict")
        self.deletes.append((str(kind), name))
        if obj["metadata"].get("finalizers"):
            if not obj["metadata"].get("deletionTimestamp"):
                obj["metadata"]["deletionTimestamp"] = _stamp(self.clock)
                self._bump(obj)
            return copy.deepcopy(obj)
        del self.objects[key]
        return None

    # -- the cache index surface -------------------------------------------------------

    def by_index(self, kind: Kind, index: str, value: str) -> list[dict[str, Any]]:
        assert index == INDEX_PROVIDER_ID, f"unexpected index {index}"
        section = "status" if kind == NODE_CLAIM else "spec"
        return [
            freeze(copy.deepcopy(o)) for o in self.all(kind)
            if (o.get(section) or {}).get("providerID") == value
        ]


# -- builders --------------------------------------------------------------------------


def nodeclaim_manifest(
    name: str = "default-abcde",
    *,
    requests: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    startup_taints: list[dict[str, str]] | None = None,
    requirements: list[dict[str, Any]] | None = None,
    node_class_group: str = "karpenter.test.sh",
    node_class_kind: str = "TestNodeClass",
    finalizer: bool = False,
) -> dict[str, Any]:
    """A NodeClaim as the provisioner would create it (for the fake provider by default)."""
    meta: dict[str, Any] = {
        "name": name,
        "labels": {LABEL_NODEPOOL: "default", **(labels or {})},
        "annotations": dict(annotations or {}),
    }
    if finalizer:
        meta["finalizers"] = [FINALIZER_TERMINATION]
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": meta,
        "spec": {
            "requirements": requirements or [],
            "resources": {"requests": dict(requests or {"cpu": "1", "memory": "1Gi"})},
            "nodeClassRef": {"group": node_class_group, "kind": node_class_kind,
                             "name": "default"},
            "taints": list(taints or []),
            "startupTaints": list(startup_taints or []),
        },
    }


def node_manifest(
    name: str,
    provider_id: str,
    *,
    ready: bool = True,
    taints: list[dict[str, str]] | None = None,
    unregistered_taint: bool = True,
    labels: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Node as a kubelet (or kwok) registers it: the unregistered taint by default."""
    all_taints = list(taints or [])
    if unregistered_taint:
        all_taints.append(UNREGISTERED_NO_EXECUTE_TAINT.to_dict())
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                              **(labels or {})}},
        "spec": {"providerID": provider_id, "taints": all_taints},
        "status": {
            "allocatable": dict(allocatable or {"cpu": "3900m", "memory": "15Gi",
                                                "pods": "110"}),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }
