"""``karpy convert``: v1beta1 (and v1alpha5) Karpenter manifests to v1.

Karpenter's own kinds are converted here (``karpenter.py``); providers convert their
NodeClasses through the ``converters`` of their ``APIExtension``. Every field that is
dropped, moved or changed becomes a ``Note``; input with no v1 meaning raises
``ConversionError`` naming the object, the field and the fix, and so does a v1 object
its model refuses (one the API server would refuse too). Objects already at the current
version pass through unchanged, checked the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import yaml
from pydantic import ValidationError

from karpy.apis.convert.fieldpath import Trail, plain, track
from karpy.apis.convert.karpenter import CONVERTERS as KARPENTER_CONVERTERS
from karpy.apis.convert.types import (
    ConversionContext,
    ConversionError,
    Converter,
    Document,
    Note,
    describe,
)
from karpy.apis.extension import APIExtension, load_extensions
from karpy.apis.model import Resource, validation_problems

__all__ = [
    "ConversionError",
    "ConversionResult",
    "Converter",
    "Note",
    "convert_documents",
    "dump_documents",
    "load_documents",
    "parse_nodeclass",
]


@dataclass(frozen=True)
class ConversionResult:
    """The v1 documents (in input order) and the notes about what changed."""

    documents: list[Document]
    notes: list[Note]


def load_documents(paths: Sequence[str], *, stdin: TextIO | None = None) -> list[Document]:
    """Every YAML document of the files ("-" is stdin); ``List`` objects are expanded."""
    docs: list[Document] = []
    for path in paths:
        try:
            text = (stdin.read() if path == "-" and stdin is not None
                    else Path(path).read_text(encoding="utf-8"))  # fmt: skip
        except OSError as err:
            raise ConversionError(f"cannot read {path}: {err.strerror}") from err
        except UnicodeDecodeError as err:
            raise ConversionError(
                f"{path} is not UTF-8 text (byte {err.start}); Kubernetes manifests are UTF-8"
            ) from err
        try:
            loaded = list(yaml.safe_load_all(text))
        except (yaml.YAMLError, ValueError, RecursionError) as err:
            # ValueError: a scalar YAML types but cannot build (a timestamp 2001-02-30).
            raise ConversionError(f"{path} is not valid YAML: {_one_line(err)}") from err
        for item in loaded:
            if item is None:
                continue
            if not isinstance(item, dict):
                raise ConversionError(f"{path}: expected a mapping, got {type(item).__name__}")
            if item.get("kind") == "List" or str(item.get("kind", "")).endswith("List"):
                items = item.get("items") or []
                if not isinstance(items, list) or not all(
                    isinstance(i, dict) for i in items if i
                ):
                    raise ConversionError(f"{path}: {item.get('kind')}.items must be a list of "
                                          "objects")
                docs.extend(i for i in items if i)
            else:
                docs.append(item)
    return docs


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())


def dump_documents(documents: Iterable[Document]) -> str:
    """Multi-document YAML, keys in the order the converters wrote them."""
    return "".join(
        "---\n" + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=10_000)
        for doc in documents
    )


def _registry(
    extensions: Sequence[APIExtension],
) -> tuple[dict[tuple[str, str], Converter], set[tuple[str, str]]]:
    converters: dict[tuple[str, str], Converter] = {}
    for conv in (*KARPENTER_CONVERTERS, *(c for e in extensions for c in e.converters)):
        converters[(conv.api_version, conv.kind)] = conv
    current = {(cls.crd.api_version, cls.crd.kind) for e in extensions for cls in e.resources}
    return converters, current


def _default_nodeclass(extensions: Sequence[APIExtension]) -> tuple[str, str] | None:
    kinds = {
        (cls.crd.group, cls.crd.kind)
        for ext in extensions
        for cls in ext.resources
        if cls.crd.kind.endswith("NodeClass")
    }
    return next(iter(kinds)) if len(kinds) == 1 else None


def convert_documents(
    documents: Sequence[Document],
    *,
    extensions: Sequence[APIExtension] | None = None,
    default_nodeclass: tuple[str, str] | None = None,
) -> ConversionResult:
    """Convert every document to v1; raise ConversionError on the first that cannot be."""
    exts = list(extensions) if extensions is not None else load_extensions()
    converters, current = _registry(exts)
    ctx = ConversionContext(default_nodeclass=default_nodeclass or _default_nodeclass(exts))
    for known_converter in converters.values():
        if known_converter.output_kind is not None:
            group = known_converter.api_version.split("/")[0]
            ctx.renamed_kinds[(group, known_converter.kind)] = known_converter.output_kind

    plan: list[tuple[int, int, Converter | None, Document]] = []
    for index, doc in enumerate(documents):
        key = (str(doc.get("apiVersion", "")), str(doc.get("kind", "")))
        conv = converters.get(key)
        if conv is None and key not in current:
            known = sorted(f"{k} ({v})" for v, k in converters) + sorted(
                f"{k} ({v}, unchanged)" for v, k in current
            )
            raise ConversionError(
                f"{describe(doc)}: karpy convert does not know kind {key[1] or '<none>'} of "
                f"apiVersion {key[0] or '<none>'}; it reads {', '.join(known)}"
            )
        plan.append((conv.phase if conv else 0, index, conv, doc))

    out: dict[int, list[Document]] = {}
    models = _models(exts)
    for _, index, conv, doc in sorted(plan, key=lambda p: (p[0], p[1])):
        trail = Trail()
        try:
            converted = [doc] if conv is None else conv.convert(track(doc, trail), ctx)
            out[index] = [plain(d) for d in converted]
        except (AttributeError, TypeError, KeyError, IndexError, ValueError, OverflowError,
                RecursionError) as err:  # fmt: skip
            # The converters read the shapes Karpenter writes; a field of another shape
            # (a string where a mapping belongs, a list of numbers ...) ends up here,
            # named by the last field the converter read.
            field = trail.last or "(object)"
            raise ConversionError(
                f"{describe(doc)}: {field}: wrong shape or value for a {doc.get('kind')} "
                f"({type(err).__name__}: {_one_line(err)}); compare it with Karpenter's "
                "API reference"
            ) from err
        for converted_doc in out[index]:
            _refuse_invalid(converted_doc, doc, models)

    for (group, kind, name), pending in ctx.kubelets.items():
        if not pending.consumed:
            ctx.notes.append(
                Note(
                    pending.source,
                    f"{kind}/{name} ({group}) is not in the input: add to its spec.kubelet "
                    f"{yaml.safe_dump(plain(pending.kubelet), default_flow_style=True).strip()}",
                )
            )
    return ConversionResult([d for i in sorted(out) for d in out[i]], ctx.notes)


def _models(extensions: Sequence[APIExtension]) -> dict[tuple[str, str], type[Resource]]:
    return {(cls.crd.api_version, cls.crd.kind): cls for e in extensions for cls in e.resources}


def _refuse_invalid(
    converted: Document, source: Document, models: dict[tuple[str, str], type[Resource]]
) -> None:
    # A v1 object the API server would refuse is no conversion: say which field, exit 2,
    # rather than write a manifest that fails at kubectl apply. (Schema-level checks of
    # the models; the CRDs' CEL rules are not evaluated here.)
    model = models.get((str(converted.get("apiVersion", "")), str(converted.get("kind", ""))))
    if model is None:
        return
    try:
        model.model_validate(converted)
    except ValidationError as err:
        problems = validation_problems(err)
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ConversionError(
            f"{describe(source)}: the v1 {converted.get('kind')} would be refused: "
            f"{_one_line(Exception(problems[0]))}{more}"
        ) from err


def parse_nodeclass(text: str) -> tuple[str, str]:
    """``Kind.group`` (as given to --default-nodeclass) to (group, kind)."""
    kind, sep, group = text.partition(".")
    if not sep or not kind or not group:
        raise ConversionError(f"{text!r} is not Kind.group (e.g. EC2NodeClass.karpenter.k8s.aws)")
    return group, kind
