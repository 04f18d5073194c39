"""An in-memory stand-in for the slice of the Kubernetes API that termination and the
NodePool controllers use, so their reconcilers can be unit-tested without a cluster.

:class:`FakeKube` answers ``karpy.runtime.Client``'s ``get``/``list``/``create``/
``patch``/``patch_status``/``delete`` and the cache's ``by_index``. It keeps what the
API server guarantees that these controllers rely on:

- JSON merge patches (RFC 7386); a ``metadata.resourceVersion`` in a patch is a
  precondition (``errors.Conflict`` when stale); writes bump the resourceVersion;
- the status subresource: a patch of the object ignores ``status``, ``patch_status``
  writes only ``status``;
- finalizers: deleting an object that has some sets ``deletionTimestamp``; the object
  disappears when its last finalizer is removed; ``uid`` preconditions on delete;
- the eviction subresource (``POST pods/<name>/eviction``) with PodDisruptionBudgets
  counted as the disruption controller does for ``minAvailable`` (healthy = Running
  and Ready and not terminating); more than one matching PDB is the API's 500.

What it does not do: watches, label/field selectors beyond equality on labels,
defaulting or validation, generation bumps, graceful pod shutdown (a deleted pod
without finalizers disappears at once, or stays terminating when
``pods_linger`` is set), or anything kube-controller-manager does (no replacement pods:
tests create them).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from karpy.runtime import Kind, Object, errors, freeze, kinds
from karpy.runtime.testing import FakeClock

MULTIPLE_PDBS = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
    "not support."
)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch of ``patch`` onto ``target`` (returns a new value)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


@dataclass
class PDB:
    """A PodDisruptionBudget with ``minAvailable`` over pods with ``labels``."""

    namespace: str
    labels: Mapping[str, str]
    min_available: int


@dataclass
class Call:
    """One write the fake received."""

    verb: str
    kind: str
    name: str
    body: Any = None
    options: dict[str, Any] = field(default_factory=dict)


class FakeKube:
    """The fake API (see the module docs). ``indexers`` maps (kind, index name) to the
    index function, as the cache would be configured."""

    def __init__(
        self,
        clock: FakeClock,
        indexers: Mapping[tuple[Kind, str], Callable[[Object], Iterable[str]]] | None = None,
    ) -> None:
        self.clock = clock
        self.indexers = dict(indexers or {})
        self.store: dict[Kind, dict[str, dict[str, Any]]] = {}
        self.pdbs: list[PDB] = []
        self.calls: list[Call] = []
        self.pods_linger = False
        self.next_error: dict[tuple[str, str], Exception] = {}
        """One-shot errors by (verb, object name)."""
        self._rv = itertools.count(1)
        self._uid = itertools.count(1)

    # -- seeding and inspecting ---------------------------------------------------------

    def add(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Store ``obj`` as if created (uid, resourceVersion, creationTimestamp filled)."""
        stored = copy.deepcopy(dict(obj))
        meta = stored.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{next(self._uid)}")
        meta.setdefault("creationTimestamp", self._now())
        meta["resourceVersion"] = str(next(self._rv))
        stored.setdefault("apiVersion", kind.api_version)
        stored.setdefault("kind", kind.kind)
        self.store.setdefault(kind, {})[self._key(kind, meta.get("namespace"), meta["name"])] = (
            stored
        )
        return stored

    def peek(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The stored object (mutable, for assertions), or None."""
        return self.store.get(kind, {}).get(self._key(kind, namespace, name))

    def objects(self, kind: Kind) -> list[dict[str, Any]]:
        """Every stored object of ``kind``."""
        return list(self.store.get(kind, {}).values())

    def set_pod_phase(self, name: str, namespace: str, phase: str, *, ready: bool) -> None:
        """Make a pod Running/Pending/..., Ready or not (what the kubelet would do)."""
        pod = self._must(kinds.POD, name, namespace)
        status = pod.setdefault("status", {})
        status["phase"] = phase
        status["conditions"] = [
            {"type": "Ready", "status": "True" if ready else "False",
             "lastTransitionTime": self._now()},
        ]
        pod["metadata"]["resourceVersion"] = str(next(self._rv))

    # -- Client ----------------------------------------------------------------------

    async def get(
        self, kind: Kind, name: str, *, namespace: str | None = None, **_: Any
    ) -> Object:
        obj = self._must(kind, name, namespace)
        return freeze(copy.deepcopy(obj))  # type: ignore[no-any-return]

    async def list(
        self, kind: Kind, *, namespace: str | None = None,
        label_selector: Mapping[str, str] | str | None = None, **_: Any,
    ) -> list[Object]:
        items = []
        for obj in self.store.get(kind, {}).values():
            meta = obj["metadata"]
            if namespace and kind.namespaced and meta.get("namespace") != namespace:
                continue
            if isinstance(label_selector, Mapping):
                labels = meta.get("labels") or {}
                if any(labels.get(k) != v for k, v in label_selector.items()):
                    continue
            items.append(freeze(copy.deepcopy(obj)))
        return items

    async def create(
        self, kind: Kind, obj: Mapping[str, Any], *, namespace: str | None = None,
        subresource: str = "", **_: Any,
    ) -> Object:
        if kind == kinds.POD and subresource == "eviction":
            name = obj["metadata"]["name"]
            self.calls.append(Call("evict", "Pod", name, copy.deepcopy(dict(obj))))
            self._raise_next("evict", name)
            return self._evict(name, namespace or "", obj)
        meta = obj["metadata"]
        self.calls.append(Call("create", kind.kind, meta["name"], copy.deepcopy(dict(obj))))
        if self.peek(kind, meta["name"], namespace or meta.get("namespace")) is not None:
            raise errors.AlreadyExists("exists", reason="AlreadyExists")
        return self.add(kind, obj)

    async def patch(
        self, kind: Kind, name: str, patch: Mapping[str, Any], *,
        namespace: str | None = None, subresource: str = "", **_: Any,
    ) -> Object:
        self.calls.append(Call("patch" + (f"/{subresource}" if subresource else ""), kind.kind,
                               name, copy.deepcopy(dict(patch))))
        self._raise_next("patch", name)
        obj = self._must(kind, name, namespace)
        want = (patch.get("metadata") or {}).get("resourceVersion")
        if want is not None and want != obj["metadata"]["resourceVersion"]:
            raise errors.Conflict(
                f"the object has been modified; rv {want} != {obj['metadata']['resourceVersion']}",
                reason="Conflict",
            )
        body = dict(patch)
        if subresource == "status":
            body = {"status": body.get("status")} if "status" in body else {}
        else:
            body.pop("status", None)
        meta_patch = dict(body.get("metadata") or {})
        meta_patch.pop("resourceVersion", None)
        if meta_patch:
            body["metadata"] = meta_patch
        else:
            body.pop("metadata", None)
        updated = merge_patch(obj, body)
        updated["metadata"]["resourceVersion"] = str(next(self._rv))
        key = self._key(kind, namespace, name)
        if updated["metadata"].get("deletionTimestamp") and not updated["metadata"].get(
            "finalizers"
        ):
            del self.store[kind][key]
        else:
            self.store[kind][key] = updated
        return freeze(copy.deepcopy(updated))  # type: ignore[no-any-return]

    async def patch_status(
        self, kind: Kind, name: str, patch: Mapping[str, Any], *,
        namespace: str | None = None, **_: Any,
    ) -> Object:
        return await self.patch(kind, name, patch, namespace=namespace, subresource="status")

    async def delete(
        self, kind: Kind, name: str, *, namespace: str | None = None,
        grace_period_seconds: int | None = None, uid: str | None = None, **_: Any,
    ) -> Object | None:
        self.calls.append(Call("delete", kind.kind, name,
                               options={"grace_period_seconds": grace_period_seconds, "uid": uid}))
        self._raise_next("delete", name)
        obj = self._must(kind, name, namespace)
        if uid and obj["metadata"].get("uid") != uid:
            raise errors.Conflict("uid precondition failed", reason="Conflict")
        self._delete(kind, obj, grace_period_seconds)
        remaining = self.peek(kind, name, namespace)
        if remaining is not None:  # held by finalizers: the API returns the object
            return freeze(copy.deepcopy(remaining))  # type: ignore[no-any-return]
        return freeze({"kind": "Status", "status": "Success"})  # type: ignore[no-any-return]

    # -- Cache -----------------------------------------------------------------------

    def by_index(self, kind: Kind, index: str, value: str) -> list[Object]:
        func = self.indexers.get((kind, index))
        if func is None:
            raise KeyError(f"no index {index!r} on {kind}")
        return [
            freeze(copy.deepcopy(obj))
            for obj in self.store.get(kind, {}).values()
            if value in func(freeze(copy.deepcopy(obj)))
        ]

    # -- internals -------------------------------------------------------------------

    def _now(self) -> str:
        return self.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")

    @staticmethod
    def _key(kind: Kind, namespace: str | None, name: str) -> str:
        return f"{namespace}/{name}" if kind.namespaced and namespace else name

    def _must(self, kind: Kind, name: str, namespace: str | None) -> dict[str, Any]:
        obj = self.peek(kind, name, namespace)
        if obj is None:
            raise errors.NotFound(f'{kind.plural} "{name}" not found', reason="NotFound")
        return obj

    def _raise_next(self, verb: str, name: str) -> None:
        error = self.next_error.pop((verb, name), None)
        if error is not None:
            raise error

    def _delete(self, kind: Kind, obj: dict[str, Any], grace: int | None) -> None:
        meta = obj["metadata"]
        key = self._key(kind, meta.get("namespace"), meta["name"])
        if kind == kinds.POD and self.pods_linger:
            if not meta.get("deletionTimestamp"):
                seconds = grace if grace is not None else int(
                    (obj.get("spec") or {}).get("terminationGracePeriodSeconds") or 30)
                meta["deletionTimestamp"] = (
                    self.clock.now() + timedelta(seconds=seconds)
                ).strftime("%Y-%m-%dT%H:%M:%SZ")
                meta["deletionGracePeriodSeconds"] = seconds
                meta["resourceVersion"] = str(next(self._rv))
            return
        if meta.get("finalizers"):
            if not meta.get("deletionTimestamp"):
                meta["deletionTimestamp"] = self._now()
                meta["resourceVersion"] = str(next(self._rv))
            return
        del self.store[kind][key]

    def _healthy(self, pod: Mapping[str, Any]) -> bool:
        status = pod.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in status.get("conditions") or ())
        return (status.get("phase") == "Running" and ready
                and not pod["metadata"].get("deletionTimestamp"))

    def _evict(self, name: str, namespace: str, body: Mapping[str, Any]) -> Object:
        pod = self._must(kinds.POD, name, namespace)
        want_uid = ((body.get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
        if want_uid and want_uid != pod["metadata"].get("uid"):
            raise errors.Conflict("uid precondition failed", reason="Conflict")
        labels = pod["metadata"].get("labels") or {}
        covering = [
            pdb for pdb in self.pdbs
            if pdb.namespace == namespace and all(labels.get(k) == v for k, v in pdb.labels.items())
        ]
        if len(covering) > 1:
            raise errors.ServerError(MULTIPLE_PDBS, status=500)
        if covering and self._healthy(pod):
            pdb = covering[0]
            healthy = sum(
                1 for p in self.store.get(kinds.POD, {}).values()
                if p["metadata"].get("namespace") == namespace and self._healthy(p)
                and all((p["metadata"].get("labels") or {}).get(k) == v
                        for k, v in pdb.labels.items())
            )
            if healthy - 1 < pdb.min_available:
                raise errors.TooManyRequests(
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    reason="TooManyRequests",
                )
        self._delete(kinds.POD, pod, None)
        return freeze({"kind": "Status", "status": "Success"})  # type: ignore[no-any-return]


@dataclass
class Event:
    """One event a controller recorded."""

    type: str
    reason: str
    message: str
    kind: str
    name: str


class FakeRecorder:
    """Records events instead of writing them (``karpy.runtime.EventRecorder``'s API)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self.events.append(Event(type_, reason, message, str(obj.get("kind", "")),
                                 str((obj.get("metadata") or {}).get("name", ""))))

    def normal(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        self.event(obj, "Normal", reason, message)

    def warning(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        self.event(obj, "Warning", reason, message)

    def reasons(self, name: str | None = None) -> list[str]:
        """The reasons recorded (about object ``name`` only, if given), in order."""
        return [e.reason for e in self.events if name is None or e.name == name]
