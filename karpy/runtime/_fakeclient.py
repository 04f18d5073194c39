"""FakeClient: an in-memory API server behind :class:`Client`'s methods, for unit tests.

A reconciler built on karpy.runtime talks to a ``Client`` (reads and writes) and to the
``Cache`` (indexed reads). ``FakeClient`` answers both from plain dicts in memory, so a
test can call ``reconcile`` directly, then look at what was stored and which writes
were sent. It keeps the API-server rules controllers depend on:

* **JSON merge patch** (RFC 7386) on ``patch``/``patch_status``; a
  ``metadata.resourceVersion`` in a patch, or in the object given to ``update``, is a
  precondition (``errors.Conflict`` when stale); every write bumps the resourceVersion.
* **The status subresource**: writes to the object leave ``status`` alone;
  ``patch_status``/``update_status`` change only ``status``.
* **Finalizers and deletion**: deleting an object with finalizers sets
  ``deletionTimestamp`` and keeps it; it disappears when a write removes the last
  finalizer. ``uid``/``resource_version`` preconditions on delete.
* **Creation**: ``uid``, ``creationTimestamp``, ``generation`` and ``resourceVersion``
  filled in; ``generateName`` gets a suffix; ``AlreadyExists`` for a taken name.
* **Selectors**: ``list`` filters by namespace, label selector (the server's syntax or
  an equality mapping) and field selector, as ``Client.list`` does.
* **The eviction subresource** (``create(POD, eviction, subresource="eviction")``):
  PodDisruptionBudgets stored in the fake are honoured — integer ``minAvailable`` or
  ``maxUnavailable`` over the pods their selector matches, a pod being healthy when it
  is Running, Ready and not terminating; a pod not Running is evicted regardless; two
  budgets over one pod is the API's 500.
* **Cache indexes**: ``by_index`` with the index functions given as ``indexers``,
  exactly as the manager's cache would be configured.
* **Write gates**: ``with_write_gate(gate)`` (what the Manager does to its client) asks
  the gate before every write, as ``Client`` does: a refused write raises
  ``errors.NotLeader`` and is neither recorded nor stored. ``with_reader`` and
  ``with_write_gate`` return views sharing the store, ``calls`` and ``fail_next``;
  reads still come from the fake's store, not from the reader.

Reads (``get``, ``list``, ``by_index``) return read-only objects, as the cache does
(``get(live=True)`` a mutable one, as the server's answer is);
writes return mutable copies, as the API server's responses are. Every write is
recorded in :attr:`FakeClient.calls`; :meth:`FakeClient.fail_next` makes one write fail.

What it does **not** do: watches or informers (nothing is pushed to event handlers: call
the reconciler), server-side apply and JSON patch (``NotImplementedError``), defaulting,
schema validation or admission, ``generation`` bumps on spec changes, owner-reference
garbage collection, percentage PDB budgets, the kubelet (a deleted pod goes at once
unless ``pods_linger``; :meth:`FakeClient.set_pod_phase` plays the kubelet's status) or
any other controller (no ReplicaSet makes replacement pods). For those, use the local
control plane (tests/controlplane).
"""

from __future__ import annotations

import builtins
import copy
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from . import kinds
from ._client import PatchType, Reader

if TYPE_CHECKING:
    from ._protocol import Client
from ._clock import Clock, SystemClock
from ._fence import WriteGate
from ._objects import Object, freeze
from ._selectors import FieldQuery, LabelQuery
from ._timestamps import format_time
from .errors import AlreadyExists, Conflict, NotFound, ServerError, TooManyRequests
from .kinds import Kind

__all__ = ["Call", "FakeClient"]

IndexFunc = Callable[[Object], Iterable[str]]

MULTIPLE_PDBS = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
    "not support."
)
PDB_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: ``patch`` applied to ``target`` (a new value; neither is changed)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


@dataclass(frozen=True)
class Call:
    """One write the fake received (``verb`` is create, update, patch, delete or evict)."""

    verb: str
    kind: Kind
    name: str
    namespace: str = ""
    subresource: str = ""
    body: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)


class FakeClient:
    """An in-memory API server with ``Client``'s methods and the cache's ``by_index``.

    See the module documentation for what it emulates and what it does not. ``clock``
    stamps creation and deletion times; ``indexers`` maps ``(kind, index name)`` to the
    index function, as given to ``Cache.informer``.
    """

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        indexers: Mapping[tuple[Kind, str], IndexFunc] | None = None,
    ) -> None:
        self.clock: Clock = clock or SystemClock()
        self.indexers = dict(indexers or {})
        self.calls: list[Call] = []
        """Every write, in order."""
        self.pods_linger = False
        """If set, a deleted pod stays terminating (deletionTimestamp = now + grace) until
        the test removes it, as a kubelet shutting containers down would."""
        self._store: dict[Kind, dict[tuple[str, str], dict[str, Any]]] = {}
        self._failures: dict[tuple[str, str], Exception] = {}
        self._versions = itertools.count(1)
        self._uids = itertools.count(1)
        self._suffixes = itertools.count(1)
        self._gate: WriteGate | None = None

    def with_reader(self, reader: Reader | None) -> FakeClient:
        """``Client.with_reader``: a view of this fake (reads stay the fake's own)."""
        return copy.copy(self)

    def with_write_gate(self, gate: WriteGate | None) -> FakeClient:
        """``Client.with_write_gate``: a view of this fake whose writes ask ``gate``."""
        view = copy.copy(self)
        view._gate = gate
        return view

    # -- seeding and inspecting (synchronous, not recorded) -----------------------------

    def add(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Store ``obj`` as if it had been created (metadata filled in) and return it."""
        stored = copy.deepcopy(dict(obj))
        meta = stored.setdefault("metadata", {})
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise ValueError(f"{kind.kind}: metadata.name or metadata.generateName is required")
            meta["name"] = f"{meta['generateName']}{next(self._suffixes):05d}"
        if kind.namespaced:
            meta["namespace"] = meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        meta.setdefault("uid", f"uid-{next(self._uids)}")
        meta.setdefault("creationTimestamp", self._stamp())
        meta.setdefault("generation", 1)
        meta["resourceVersion"] = str(next(self._versions))
        stored.setdefault("apiVersion", kind.api_version)
        stored.setdefault("kind", kind.kind)
        self._objects(kind)[self._key(kind, meta["name"], meta.get("namespace"))] = stored
        return stored

    def peek(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The stored object itself (mutable: edits change the fake's state), or None."""
        return self._objects(kind).get(self._key(kind, name, namespace))

    def objects(self, kind: Kind) -> list[dict[str, Any]]:
        """Every stored object of ``kind`` (the stored dicts themselves)."""
        return list(self._objects(kind).values())

    def remove(self, kind: Kind, name: str, namespace: str | None = None) -> None:
        """Drop an object at once, finalizers or not (what another controller did)."""
        self._objects(kind).pop(self._key(kind, name, namespace), None)

    def clear(self, kind: Kind) -> None:
        """Drop every object of ``kind`` at once."""
        self._objects(kind).clear()

    def set_pod_phase(self, name: str, namespace: str, phase: str, *, ready: bool) -> None:
        """Set a pod's phase and Ready condition, as its kubelet would."""
        pod = self._must(kinds.POD, name, namespace)
        status = pod.setdefault("status", {})
        status["phase"] = phase
        status["conditions"] = [
            {
                "type": "Ready",
                "status": "True" if ready else "False",
                "lastTransitionTime": self._stamp(),
            }
        ]
        self._bump(pod)

    def fail_next(self, verb: str, name: str, error: Exception) -> None:
        """Make the next ``verb`` (create, update, patch, delete, evict) of ``name`` raise
        ``error`` instead of doing anything (it is still recorded in ``calls``)."""
        self._failures[verb, name] = error

    # -- Client: reads --------------------------------------------------------------------

    async def get(
        self, kind: Kind, name: str, *, namespace: str | None = None, live: bool = False, **_: Any
    ) -> Object:
        """``Client.get``: a read-only copy (as from the cache), a mutable one with
        ``live=True`` (as from the server), or ``errors.NotFound``."""
        found = copy.deepcopy(self._must(kind, name, namespace))
        return found if live else freeze(found)

    async def list(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | None = None,
        **_: Any,
    ) -> list[Object]:
        """``Client.list``: read-only copies of the matching objects."""
        labels = LabelQuery.parse(label_selector)
        fields = FieldQuery.parse(field_selector)
        out = []
        for obj in self._objects(kind).values():
            meta = obj["metadata"]
            if namespace and kind.namespaced and meta.get("namespace") != namespace:
                continue
            if labels and not labels.matches(meta.get("labels")):
                continue
            if fields and not fields.matches(obj):
                continue
            out.append(freeze(copy.deepcopy(obj)))
        return out

    def by_index(self, kind: Kind, index: str, value: str) -> builtins.list[Object]:
        """``Cache.by_index``: objects whose index function yields ``value``."""
        func = self.indexers.get((kind, index))
        if func is None:
            raise KeyError(f"no index {index!r} on {kind}: pass it in FakeClient(indexers=...)")
        found = []
        for obj in self._objects(kind).values():
            frozen: Object = freeze(copy.deepcopy(obj))
            if value in func(frozen):
                found.append(frozen)
        return found

    # -- Client: writes -------------------------------------------------------------------

    async def create(
        self,
        kind: Kind,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        subresource: str = "",
        **_: Any,
    ) -> Object:
        """``Client.create``; ``subresource="eviction"`` on a pod evicts it."""
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or meta.get("generateName") or "")
        ns = (namespace or meta.get("namespace") or "default") if kind.namespaced else ""
        if kind == kinds.POD and subresource == "eviction":
            self._record(Call("evict", kind, name, ns, subresource, copy.deepcopy(dict(obj))))
            return self._evict(name, ns, obj)
        if subresource:
            raise NotImplementedError(f"FakeClient: create of {kind}/{subresource}")
        self._record(Call("create", kind, name, ns, body=copy.deepcopy(dict(obj))))
        if meta.get("name") and self.peek(kind, meta["name"], ns) is not None:
            raise AlreadyExists(f'{kind.plural} "{name}" already exists', reason="AlreadyExists")
        body = copy.deepcopy(dict(obj))
        if kind.namespaced:
            body.setdefault("metadata", {})["namespace"] = ns
        return copy.deepcopy(self.add(kind, body))

    async def update(
        self,
        kind: Kind,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        subresource: str = "",
        **_: Any,
    ) -> Object:
        """``Client.update`` (PUT): replaces the object, or only its status."""
        meta = obj.get("metadata") or {}
        name = str(meta.get("name", ""))
        ns = namespace or meta.get("namespace")
        self._record(Call("update", kind, name, ns or "", subresource, copy.deepcopy(dict(obj))))
        current = self._must(kind, name, ns)
        self._check_version(kind, name, current, meta.get("resourceVersion"))
        if subresource == "status":
            replaced = copy.deepcopy(current)
            replaced["status"] = copy.deepcopy(obj.get("status"))
        else:
            replaced = copy.deepcopy(dict(obj))
            replaced["metadata"] = {**copy.deepcopy(dict(meta)), **_server_fields(current)}
            if "status" in current:
                replaced["status"] = current["status"]
            else:
                replaced.pop("status", None)
        return self._store_write(kind, name, ns, replaced)

    async def update_status(
        self, kind: Kind, obj: Mapping[str, Any], *, namespace: str | None = None, **_: Any
    ) -> Object:
        """``Client.update_status``."""
        return await self.update(kind, obj, namespace=namespace, subresource="status")

    async def patch(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str = "",
        **_: Any,
    ) -> Object:
        """``Client.patch`` with a JSON merge patch (other patch types are not emulated)."""
        if patch_type is not PatchType.MERGE or not isinstance(patch, Mapping):
            raise NotImplementedError(f"FakeClient speaks merge patches only, not {patch_type}")
        self._record(
            Call("patch", kind, name, namespace or "", subresource, copy.deepcopy(dict(patch)))
        )
        current = self._must(kind, name, namespace)
        meta_patch = dict(patch.get("metadata") or {})
        self._check_version(kind, name, current, meta_patch.pop("resourceVersion", None))
        if subresource == "status":
            body: dict[str, Any] = {"status": patch["status"]} if "status" in patch else {}
        elif subresource:
            raise NotImplementedError(f"FakeClient: patch of {kind}/{subresource}")
        else:
            body = {k: v for k, v in patch.items() if k not in ("status", "metadata")}
            if meta_patch:
                body["metadata"] = meta_patch
        return self._store_write(kind, name, namespace, merge_patch(current, body))

    async def patch_status(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        **_: Any,
    ) -> Object:
        """``Client.patch_status``."""
        return await self.patch(
            kind, name, patch, namespace=namespace, patch_type=patch_type, subresource="status"
        )

    async def apply(self, kind: Kind, obj: Mapping[str, Any], **_: Any) -> Object:
        """Server-side apply is not emulated."""
        raise NotImplementedError("FakeClient does not emulate server-side apply")

    async def delete(
        self,
        kind: Kind,
        name: str,
        *,
        namespace: str | None = None,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        **_: Any,
    ) -> Object | None:
        """``Client.delete``: the object while finalizers hold it, else a Status."""
        options = {"grace_period_seconds": grace_period_seconds, "uid": uid}
        self._record(Call("delete", kind, name, namespace or "", options=options))
        obj = self._must(kind, name, namespace)
        if uid and obj["metadata"].get("uid") != uid:
            raise Conflict(
                f'{kind.plural} "{name}": Precondition failed: UID in precondition: {uid}, '
                f"UID in object meta: {obj['metadata'].get('uid')}",
                reason="Conflict",
            )
        self._check_version(kind, name, obj, resource_version)
        self._delete(kind, obj, grace_period_seconds)
        remaining = self.peek(kind, name, namespace)
        if remaining is not None:
            return copy.deepcopy(remaining)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success"}

    # -- internals --------------------------------------------------------------------

    def _objects(self, kind: Kind) -> dict[tuple[str, str], dict[str, Any]]:
        return self._store.setdefault(kind, {})

    @staticmethod
    def _key(kind: Kind, name: str, namespace: str | None) -> tuple[str, str]:
        return ((namespace or "default") if kind.namespaced else "", name)

    def _stamp(self, after: float = 0.0) -> str:
        return format_time(self.clock.now() + timedelta(seconds=after))

    def _bump(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self._versions))

    def _record(self, call: Call) -> None:
        if self._gate is not None:
            self._gate.write_allowance()  # NotLeader: refused before it was sent
        self.calls.append(call)
        error = self._failures.pop((call.verb, call.name), None)
        if error is not None:
            raise error

    def _must(self, kind: Kind, name: str, namespace: str | None) -> dict[str, Any]:
        obj = self.peek(kind, name, namespace)
        if obj is None:
            raise NotFound(f'{kind.plural} "{name}" not found', reason="NotFound")
        return obj

    @staticmethod
    def _check_version(kind: Kind, name: str, current: Mapping[str, Any], want: Any) -> None:
        have = current["metadata"]["resourceVersion"]
        if want is not None and str(want) != have:
            raise Conflict(
                f'Operation cannot be fulfilled on {kind.plural} "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
                reason="Conflict",
            )

    def _store_write(
        self, kind: Kind, name: str, namespace: str | None, updated: dict[str, Any]
    ) -> Object:
        self._bump(updated)
        key = self._key(kind, name, namespace)
        meta = updated["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            del self._objects(kind)[key]
        else:
            self._objects(kind)[key] = updated
        return copy.deepcopy(updated)

    def _delete(self, kind: Kind, obj: dict[str, Any], grace: int | None) -> None:
        meta = obj["metadata"]
        if kind == kinds.POD and self.pods_linger:
            if not meta.get("deletionTimestamp"):
                spec = obj.get("spec") or {}
                seconds = grace if grace is not None else int(
                    spec.get("terminationGracePeriodSeconds") or 30
                )
                meta["deletionTimestamp"] = self._stamp(after=seconds)
                meta["deletionGracePeriodSeconds"] = seconds
                self._bump(obj)
            return
        if meta.get("finalizers"):
            if not meta.get("deletionTimestamp"):
                meta["deletionTimestamp"] = self._stamp()
                self._bump(obj)
            return
        self.remove(kind, meta["name"], meta.get("namespace"))

    # -- eviction -----------------------------------------------------------------------

    def _evict(self, name: str, namespace: str, body: Mapping[str, Any]) -> Object:
        pod = self._must(kinds.POD, name, namespace)
        preconditions = (body.get("deleteOptions") or {}).get("preconditions") or {}
        want_uid = preconditions.get("uid")
        if want_uid and want_uid != pod["metadata"].get("uid"):
            raise Conflict(f'pods "{name}": uid precondition failed', reason="Conflict")
        labels = pod["metadata"].get("labels") or {}
        budgets = [
            pdb
            for pdb in self._objects(kinds.POD_DISRUPTION_BUDGET).values()
            if pdb["metadata"].get("namespace") == namespace
            and _selector(pdb).matches(labels)
        ]
        if len(budgets) > 1:
            raise ServerError(MULTIPLE_PDBS, status=500)
        phase = (pod.get("status") or {}).get("phase")
        if budgets and phase == "Running":
            pdb = budgets[0]
            covered = [
                p
                for p in self._objects(kinds.POD).values()
                if p["metadata"].get("namespace") == namespace
                and _selector(pdb).matches(p["metadata"].get("labels"))
            ]
            healthy = sum(1 for p in covered if _healthy(p))
            # The pod's own eviction lowers the healthy count only if it is healthy.
            after = healthy - 1 if _healthy(pod) else healthy
            if after < _min_healthy(pdb, len(covered)):
                raise TooManyRequests(PDB_VIOLATION, reason="TooManyRequests")
        if "All" in ((body.get("deleteOptions") or {}).get("dryRun") or ()):
            return {"kind": "Status", "apiVersion": "v1", "status": "Success"}
        self._delete(kinds.POD, pod, None)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success"}


def _server_fields(current: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata an update cannot change."""
    meta = current["metadata"]
    keep = ("uid", "creationTimestamp", "generation", "deletionTimestamp", "namespace")
    return {k: copy.deepcopy(meta[k]) for k in keep if k in meta}


def _healthy(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
    return status.get("phase") == "Running" and ready and not pod["metadata"].get(
        "deletionTimestamp"
    )


def _selector(pdb: Mapping[str, Any]) -> LabelQuery:
    """A PDB's metav1.LabelSelector in the selector syntax LabelQuery parses."""
    selector = (pdb.get("spec") or {}).get("selector") or {}
    terms = [f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or ():
        key, op, values = expr["key"], expr["operator"], ",".join(expr.get("values") or ())
        terms.append(
            {
                "In": f"{key} in ({values})",
                "NotIn": f"{key} notin ({values})",
                "Exists": key,
                "DoesNotExist": f"!{key}",
            }[op]
        )
    return LabelQuery.parse(",".join(terms))


def _min_healthy(pdb: Mapping[str, Any], covered: int) -> int:
    spec = pdb.get("spec") or {}
    for field_name in ("minAvailable", "maxUnavailable"):
        value = spec.get(field_name)
        if value is None:
            continue
        if not isinstance(value, int):
            raise NotImplementedError(
                f"FakeClient: PodDisruptionBudget {pdb['metadata']['name']} spec.{field_name}="
                f"{value!r}: only integer budgets are emulated"
            )
        return value if field_name == "minAvailable" else covered - value
    return 0


if TYPE_CHECKING:  # mypy proves the fake stands in for the real client

    def _conforms(fake: FakeClient) -> Client:
        return fake
