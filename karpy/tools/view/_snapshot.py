"""Snapshot files: a cluster's objects as ``kubectl get -o yaml`` prints them.

A snapshot is a YAML or JSON file holding a ``List`` (``kind: List`` or ``PodList``,
``NodeList``, ... with ``items``), a JSON array, a single object, or a multi-document
YAML stream of any of those: exactly what ``kubectl get pods,nodes,nodepools -A -o yaml``
or ``karpy snapshot`` writes. Objects of the kinds a view reads
(:func:`~karpy.tools.view._kinds.view_kinds`) are kept; other kinds (Services,
Deployments, ...) are counted and ignored.

Bad input is refused with :class:`SnapshotError`, whose message names the file, the
document (and item) and what is wrong with it, so a hand-edited file is easy to fix.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from karpy.runtime import Client, Kind, errors, thaw
from karpy.state import NODE_POOL
from karpy.tools.view._kinds import OPTIONAL_KINDS, node_class_kinds, view_kinds

__all__ = ["Snapshot", "SnapshotError", "take_snapshot"]

ObjectKey = tuple[str, str]
"""(namespace or "", name)."""


class SnapshotError(ValueError):
    """A snapshot file (or a ``-f`` manifest) cannot be read; the message names the
    file, the document and the problem."""


def _loader() -> type[yaml.SafeLoader]:
    # libyaml's loader is ~10x faster on large snapshots; fall back when it is absent.
    loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return loader


def _kinds_by_type() -> dict[tuple[str, str], Kind]:
    return {(k.group, k.kind): k for k in view_kinds()}


def _group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0]


@dataclass(frozen=True)
class Snapshot:
    """The objects of one snapshot, by kind (see the module docstring).

    Build one with :meth:`load` (a file), :meth:`parse` (text) or :func:`take_snapshot`
    (a live cluster); :meth:`with_objects` gives a copy where some objects are replaced
    or added (``karpy simulate -f``).
    """

    objects: Mapping[Kind, Mapping[ObjectKey, Mapping[str, Any]]]
    """Each kind's objects by (namespace, name), in file order."""
    ignored: Mapping[str, int] = field(default_factory=dict)
    """How many objects of each kind the view does not read (``apiVersion/kind``)."""
    source: str = "<snapshot>"
    """Where it came from (a path, or a cluster's server URL)."""

    # -- reading -------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path) -> Snapshot:
        """Read a snapshot file (YAML or JSON); :class:`SnapshotError` if it is unreadable
        or holds a malformed object."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SnapshotError(f"{path}: cannot read: {exc}") from exc
        return cls.parse(text, source=str(path))

    @classmethod
    def parse(cls, text: str, *, source: str = "<snapshot>") -> Snapshot:
        """Parse snapshot text (see the module docstring)."""
        return cls.from_documents(_documents(text, source), source=source)

    @classmethod
    def from_documents(
        cls, documents: Iterable[Any], *, source: str = "<snapshot>"
    ) -> Snapshot:
        """Build a snapshot from decoded documents (Lists, arrays or single objects)."""
        known = _kinds_by_type()
        objects: dict[Kind, dict[ObjectKey, dict[str, Any]]] = {}
        where_seen: dict[tuple[Kind, ObjectKey], str] = {}
        ignored: dict[str, int] = {}
        for index, document in enumerate(documents, start=1):
            for where, obj in _items(document, f"{source}: document {index}"):
                kind_name, api_version = _type_of(obj, where)
                kind = known.get((_group_of(api_version), kind_name))
                if kind is None:
                    label = f"{api_version}/{kind_name}"
                    ignored[label] = ignored.get(label, 0) + 1
                    continue
                if api_version != kind.api_version:
                    raise SnapshotError(
                        f"{where}: {kind_name} apiVersion {api_version!r} is not read; "
                        f"karpy reads {kind.api_version} (re-export it with kubectl get)"
                    )
                key = _key_of(kind, obj, where)
                seen = where_seen.get((kind, key))
                if seen is not None:
                    raise SnapshotError(
                        f"{where}: {kind_name} {_show(key)} appears twice (first at {seen})"
                    )
                where_seen[(kind, key)] = where
                objects.setdefault(kind, {})[key] = obj
        return cls(objects=objects, ignored=ignored, source=source)

    # -- using ---------------------------------------------------------------------------

    def of(self, kind: Kind) -> list[Mapping[str, Any]]:
        """The objects of ``kind``, in file order."""
        return list(self.objects.get(kind, {}).values())

    def count(self) -> dict[str, int]:
        """How many objects of each kind (``kind`` name -> count), for messages."""
        return {kind.kind: len(items) for kind, items in self.objects.items() if items}

    def with_objects(self, other: Snapshot) -> Snapshot:
        """A copy where every object of ``other`` replaces the one of the same kind,
        namespace and name (or is added)."""
        merged: dict[Kind, dict[ObjectKey, Mapping[str, Any]]] = {
            kind: dict(items) for kind, items in self.objects.items()
        }
        for kind, items in other.objects.items():
            merged.setdefault(kind, {}).update(items)
        return Snapshot(objects=merged, ignored=dict(self.ignored), source=self.source)

    def to_list(self) -> dict[str, Any]:
        """The snapshot as one ``v1 List`` (what :meth:`dump` writes)."""
        items = [dict(obj) for kind in view_kinds() for obj in self.of(kind)]
        return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}

    def dump(self) -> str:
        """The snapshot as YAML, readable by :meth:`parse` and by ``kubectl``."""
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        return yaml.dump(self.to_list(), Dumper=dumper, sort_keys=False, width=120)


#: How deeply a snapshot may nest. A Kubernetes object nests a few dozen levels at most;
#: anything deeper is hostile or broken, and would end in a RecursionError somewhere
#: further on (a JSON decoder, a deep copy) instead of a message naming the file.
MAX_DEPTH = 100


def _documents(text: str, source: str) -> list[Any]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            documents = [json.loads(text)]
        except json.JSONDecodeError as exc:
            raise SnapshotError(
                f"{source}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
            ) from exc
        except RecursionError:
            raise SnapshotError(
                f"{source}: not valid JSON: nested deeper than {MAX_DEPTH} levels"
            ) from None
    else:
        try:
            documents = [d for d in yaml.load_all(text, Loader=_loader()) if d is not None]
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise SnapshotError(f"{source}: not valid YAML{at}: {problem}") from exc
        except RecursionError:
            raise SnapshotError(
                f"{source}: not valid YAML: nested deeper than {MAX_DEPTH} levels"
            ) from None
    for index, document in enumerate(documents, start=1):
        problem = _shape_problem(document, budget=len(text) + 1000)
        if problem:
            raise SnapshotError(f"{source}: document {index} {problem}")
    return documents


def _shape_problem(document: Any, *, budget: int) -> str | None:
    # Iterative, so the check itself cannot overflow the stack. Without YAML aliases
    # every value takes at least one character of the text, so a document holding more
    # values than the text has characters is an alias bomb ("billion laughs"), and an
    # alias cycle (&a [*a]) shows as unbounded depth.
    stack: list[tuple[Any, int]] = [(document, 1)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > budget:
            return "expands (through YAML aliases) to more values than the file has characters"
        if isinstance(node, dict):
            children: Iterable[Any] = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > MAX_DEPTH:
            return f"nests deeper than {MAX_DEPTH} levels"
        stack.extend((child, depth + 1) for child in children)
    return None


def _items(document: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object of one document, each with the place it came from."""
    if isinstance(document, list):
        for i, item in enumerate(document):
            yield from _items(item, f"{where}, [{i}]")
        return
    if not isinstance(document, dict):
        raise SnapshotError(
            f"{where}: expected a Kubernetes object or List, got a {type(document).__name__}"
        )
    kind = document.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and "items" in document:
        items = document.get("items") or []
        if not isinstance(items, list):
            raise SnapshotError(f"{where}: {kind}.items must be a list")
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise SnapshotError(
                    f"{where}, items[{i}]: expected an object, got a {type(item).__name__}"
                )
            if "kind" not in item and kind != "List":
                # kubectl's typed lists (PodList) may leave the items' kind out.
                item = {"apiVersion": document.get("apiVersion", ""),
                        "kind": kind.removesuffix("List"), **item}
            yield f"{where}, items[{i}]", item
        return
    yield where, document


def _type_of(obj: Mapping[str, Any], where: str) -> tuple[str, str]:
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if not isinstance(kind, str) or not kind:
        raise SnapshotError(f"{where}: missing kind (every object needs apiVersion and kind)")
    if not isinstance(api_version, str) or not api_version:
        raise SnapshotError(f"{where}: {kind} is missing apiVersion")
    return kind, api_version


def _key_of(kind: Kind, obj: dict[str, Any], where: str) -> ObjectKey:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise SnapshotError(f"{where}: {kind.kind} is missing metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise SnapshotError(f"{where}: {kind.kind} is missing metadata.name")
    if not kind.namespaced:
        return ("", name)
    namespace = meta.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise SnapshotError(f"{where}: {kind.kind} {name}: metadata.namespace must be a string")
    meta["namespace"] = namespace
    return (namespace, name)


def _node_class_ref(nodepool: Mapping[str, Any]) -> tuple[str, str]:
    spec = ((nodepool.get("spec") or {}).get("template") or {}).get("spec") or {}
    ref = spec.get("nodeClassRef") or {}
    return (str(ref.get("group", "")), str(ref.get("kind", "")))


def _show(key: ObjectKey) -> str:
    namespace, name = key
    return f"{namespace}/{name}" if namespace else name


async def take_snapshot(client: Client, *, source: str = "<cluster>") -> Snapshot:
    """List every kind a view reads from a live cluster (reads only).

    A provider's NodeClass kind whose CRD is not installed is skipped, and so is one the
    credentials may not list when no NodePool refers to it; NodeOverlays likewise when
    their CRD is not installed or may not be listed; any other kind the
    credentials may not list raises :class:`SnapshotError` naming the missing permission.
    """
    optional = set(node_class_kinds())
    referenced: set[tuple[str, str]] = set()
    # NodeOverlays are read where the CRD is served and may be listed (its gate may be off).
    optional |= set(OPTIONAL_KINDS)
    documents: list[dict[str, Any]] = []
    for kind in view_kinds():
        try:
            listed: Sequence[Any] = await client.list(kind)
        except errors.NotFound:
            if kind in optional:
                continue
            raise
        except errors.Forbidden as exc:
            if kind in OPTIONAL_KINDS or (
                kind in optional and (kind.group, kind.kind) not in referenced
            ):
                continue  # another provider's NodeClass, which no NodePool uses
            resource = kind.resource
            raise SnapshotError(
                f"{source}: may not list {resource} (RBAC: grant get/list/watch on "
                f"{resource}): {exc}"
            ) from exc
        if kind == NODE_POOL:
            referenced = {_node_class_ref(pool) for pool in listed}
        for obj in listed:
            item = thaw(obj)
            item.get("metadata", {}).pop("managedFields", None)
            documents.append(item)
    return Snapshot.from_documents([documents], source=source)
