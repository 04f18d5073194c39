"""Structural OpenAPI v3 schemas from karpy's pydantic models.

The walk is our own rather than pydantic's JSON Schema because the API server wants a
*structural* schema: every node typed, no ``$ref``, no ``anyOf`` except the int-or-string
form, nullable fields simply optional. What pydantic knows (types, Literal enums,
bounds, patterns, descriptions, scalar defaults) is translated; what only a CRD knows
comes from ``json_schema_extra`` and is copied verbatim (keys starting ``x-karpy-`` are
instructions to this generator and are removed).
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from karpy.apis.model import IntOrString

__all__ = ["LabelRestrictions", "SchemaError", "model_schema", "resource_schema"]

#: How to rewrite an ``x-karpy-label-restrictions`` marker into CEL rules.
LabelRestrictions = Callable[[str], list[dict[str, str]]]


class SchemaError(TypeError):
    """A model uses a type this generator cannot express as a structural schema."""


@dataclass
class _Context:
    label_restrictions: LabelRestrictions | None
    path: str


def _describe(text: str | None, *, first_paragraph: bool = False) -> str | None:
    """Descriptions with each paragraph on one line. Of a class docstring only the first
    paragraph is used: later ones are notes for Python readers."""
    if not text:
        return None
    paragraphs = inspect.cleandoc(text).split("\n\n")
    if first_paragraph:
        paragraphs = paragraphs[:1]
    return "\n\n".join(" ".join(p.split()).replace("``", "`") for p in paragraphs)


def _sorted_keys(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _sorted_keys(node[k]) for k in sorted(node)}
    if isinstance(node, list):
        return [_sorted_keys(v) for v in node]
    return node


def _apply_constraints(node: dict[str, Any], metadata: list[Any]) -> None:
    kind = node.get("type")
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            node["minimum"] = item.ge
        elif isinstance(item, annotated_types.Le):
            node["maximum"] = item.le
        elif isinstance(item, annotated_types.Gt):
            node["minimum"] = item.gt
            node["exclusiveMinimum"] = True
        elif isinstance(item, annotated_types.Lt):
            node["maximum"] = item.lt
            node["exclusiveMaximum"] = True
        elif isinstance(item, annotated_types.MinLen | annotated_types.MaxLen):
            bound = "min" if isinstance(item, annotated_types.MinLen) else "max"
            value = item.min_length if isinstance(item, annotated_types.MinLen) else item.max_length
            suffix = {"array": "Items", "object": "Properties"}.get(str(kind), "Length")
            node[f"{bound}{suffix}"] = value
        elif getattr(item, "pattern", None) is not None:
            pattern = item.pattern  # the text of a compiled (re.ASCII) pattern, or text
            node["pattern"] = pattern.pattern if isinstance(pattern, re.Pattern) else pattern


def _merge_extra(node: dict[str, Any], extra: Any, ctx: _Context) -> None:
    if not isinstance(extra, Mapping):
        return
    for key, value in extra.items():
        if key == "x-karpy-label-restrictions":
            if ctx.label_restrictions is not None:
                rules = ctx.label_restrictions(str(value))
                if rules:
                    node.setdefault("x-kubernetes-validations", []).extend(rules)
        elif key.startswith("x-karpy-"):
            continue
        elif key == "x-kubernetes-validations":
            node.setdefault(key, []).extend(value)
        else:
            node[key] = value


def _split_annotated(tp: Any) -> tuple[Any, list[Any], list[Any]]:
    """(base type, constraint metadata, json_schema_extra dicts) of a possibly Annotated type."""
    metadata: list[Any] = []
    extras: list[Any] = []
    while get_origin(tp) is Annotated:
        base, *annotations = get_args(tp)
        for ann in annotations:
            if isinstance(ann, FieldInfo):
                metadata.extend(ann.metadata)
                if ann.json_schema_extra:
                    extras.append(ann.json_schema_extra)
            else:
                metadata.append(ann)
        tp = base
    return tp, metadata, extras


def _strip_optional(tp: Any) -> Any:
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
        return Union[tuple(args)]  # noqa: UP007 - rebuilding a union from parts
    return tp


def _type_schema(tp: Any, ctx: _Context) -> dict[str, Any]:
    tp = _strip_optional(tp)
    tp, metadata, extras = _split_annotated(tp)
    tp = _strip_optional(tp)
    node = _base_schema(tp, metadata, ctx)
    _apply_constraints(node, metadata)
    for extra in extras:
        _merge_extra(node, extra, ctx)
    return node


def _base_schema(tp: Any, metadata: list[Any], ctx: _Context) -> dict[str, Any]:
    marker = next((m for m in metadata if isinstance(m, IntOrString)), None)
    if marker is not None:
        node: dict[str, Any] = {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
        }
        if marker.pattern:
            node["pattern"] = marker.pattern
        if marker.max_length is not None:
            node["maxLength"] = marker.max_length
        return node
    origin = get_origin(tp)
    if origin is Literal:
        values = list(get_args(tp))
        if all(isinstance(v, str) for v in values):
            return {"enum": values, "type": "string"}
        raise SchemaError(f"{ctx.path}: only string Literals are supported, got {tp!r}")
    if inspect.isclass(tp) and issubclass(tp, Enum):
        return {"enum": [m.value for m in tp], "type": "string"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    if tp is datetime:
        return {"format": "date-time", "type": "string"}
    if origin is list:
        (item,) = get_args(tp)
        return {"items": _type_schema(item, ctx), "type": "array"}
    if origin is dict:
        key, value = get_args(tp)
        if key is not str:
            raise SchemaError(f"{ctx.path}: map keys must be strings, got {key!r}")
        if value is Any:
            return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        return {"additionalProperties": _type_schema(value, ctx), "type": "object"}
    if inspect.isclass(tp) and issubclass(tp, BaseModel):
        return model_schema(tp, label_restrictions=ctx.label_restrictions, path=ctx.path)
    raise SchemaError(f"{ctx.path}: cannot express {tp!r} in a structural schema")


def _field_schema(name: str, info: FieldInfo, ctx: _Context) -> dict[str, Any]:
    node = _type_schema(info.annotation, ctx)
    _apply_constraints(node, list(info.metadata))
    description = _describe(info.description)
    if description:
        node["description"] = description
    default = info.default
    # Scalar defaults become CRD defaults; "" never does (it is how we spell "unset
    # but always written"), and collections only through an explicit json_schema_extra.
    if (
        default is not PydanticUndefined
        and default is not None
        and default != ""
        and isinstance(default, str | int | float | bool)
    ):
        node["default"] = default
    _merge_extra(node, info.json_schema_extra, ctx)
    return node


def _is_required(info: FieldInfo) -> bool:
    extra = info.json_schema_extra
    forced = isinstance(extra, Mapping) and bool(extra.get("x-karpy-required"))
    return info.is_required() or forced


def model_schema(
    cls: type[BaseModel],
    *,
    label_restrictions: LabelRestrictions | None = None,
    path: str = "",
) -> dict[str, Any]:
    """The structural schema of an object model (properties sorted, required listed)."""
    ctx = _Context(label_restrictions, path or cls.__name__)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, info in cls.model_fields.items():
        key = info.serialization_alias or info.alias or name
        field_ctx = _Context(label_restrictions, f"{ctx.path}.{key}")
        properties[key] = _field_schema(name, info, field_ctx)
        if _is_required(info):
            required.append(key)
    node: dict[str, Any] = {}
    description = _describe(cls.__doc__, first_paragraph=True)
    if description:
        node["description"] = description
    node["properties"] = dict(sorted(properties.items()))
    if required:
        node["required"] = sorted(required)
    node["type"] = "object"
    _merge_extra(node, cls.model_config.get("json_schema_extra"), ctx)
    return node


_API_VERSION_DESCRIPTION = (
    "The versioned schema of this object: group/version. Servers convert recognized "
    "versions and may reject others."
)
_KIND_DESCRIPTION = "The REST resource this object represents, in CamelCase."


def resource_schema(
    cls: type[BaseModel],
    *,
    required: tuple[str, ...] = (),
    label_restrictions: LabelRestrictions | None = None,
) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of a top-level kind: apiVersion, kind, metadata, spec, status."""
    ctx = _Context(label_restrictions, cls.__name__)
    properties: dict[str, Any] = {
        "apiVersion": {"description": _API_VERSION_DESCRIPTION, "type": "string"},
        "kind": {"description": _KIND_DESCRIPTION, "type": "string"},
        "metadata": {"type": "object"},
    }
    for name in ("spec", "status"):
        info = cls.model_fields.get(name)
        if info is None:
            continue
        field_ctx = _Context(ctx.label_restrictions, f"{ctx.path}.{name}")
        node = _field_schema(name, info, field_ctx)
        properties[name] = node
    node = {"description": _describe(cls.__doc__, first_paragraph=True) or cls.__name__}
    node["properties"] = dict(sorted(properties.items()))
    if required:
        node["required"] = sorted(required)
    node["type"] = "object"
    sorted_node: dict[str, Any] = _sorted_keys(node)
    return sorted_node
