"""The base classes every karpy API model derives from.

A model mirrors one Kubernetes object (or part of one) in the shape the API server
stores it: camelCase keys through aliases, unknown keys dropped (the CRD prunes them
too), and Go's ``omitempty`` on output: optional fields that are ``None`` or empty are
left out, so ``model -> JSON -> API server -> model`` gives back an equal model.

The CRD generator (``karpy.apis.crdgen``) reads these classes; CRD-only facts that
pydantic has no word for (CEL rules, list types, a schema default for a nested object)
go in ``json_schema_extra`` and are copied into the OpenAPI schema as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)
from pydantic.alias_generators import to_camel

from karpy.apis.quantity import MAX_QUANTITY_LENGTH, QUANTITY_PATTERN, parse_quantity

__all__ = [
    "QUANTITY_PATTERN",
    "CRDInfo",
    "IntOrString",
    "KubeModel",
    "ObjectMeta",
    "OwnerReference",
    "PrinterColumn",
    "Quantity",
    "QuantityString",
    "Resource",
    "ResourceList",
    "Rule",
    "go_pattern",
    "validation_problems",
    "validations",
]

@dataclass(frozen=True)
class IntOrString:
    """Schema marker: the value is an integer or a string (``x-kubernetes-int-or-string``);
    ``pattern`` and ``max_length`` constrain the string form."""

    pattern: str | None = None
    max_length: int | None = None


def go_pattern(text: str) -> re.Pattern[str]:
    """A CRD ``pattern`` as the API server reads it: RE2, where ``\\d`` is ``[0-9]`` and
    ``\\s`` is ASCII white space. pydantic's engine (and Python's ``re``) read them as
    Unicode classes, which let ``"\\u0661"`` or a no-break space through; a compiled re.ASCII
    pattern keeps the text (the CRD generator writes ``pattern.pattern``) and the meaning.
    (Python's ASCII ``\\s`` also takes ``\\v``, which RE2's does not.)"""
    return re.compile(text, re.ASCII)


def _check_quantity(value: int | str) -> int | str:
    # The parser is the one judge of a quantity: what it refuses (a fractional exponent
    # the CRD pattern lets through, text beyond the length limit) a model refuses too.
    parse_quantity(value)
    return value


#: A resource quantity kept exactly as written ("500m", "4Gi" or a bare integer).
Quantity = Annotated[
    int | str,
    AfterValidator(_check_quantity),
    IntOrString(QUANTITY_PATTERN, max_length=MAX_QUANTITY_LENGTH),
]
#: A quantity a CRD types as a plain string (EC2NodeClass kubeReserved, ...): the CRD
#: pattern, and the parser as its judge ("1.5e3.5" matches the pattern; ParseQuantity
#: refuses it).
QuantityString = Annotated[
    str,
    Field(pattern=QUANTITY_PATTERN, max_length=MAX_QUANTITY_LENGTH),
    AfterValidator(_check_quantity),
]
#: Resource name to quantity, as in core/v1 ResourceList.
ResourceList = dict[str, Quantity]


def validation_problems(exc: ValidationError) -> list[str]:
    """One line per problem of a failed parse, each naming the field as a path
    (``spec.disruption.budgets[0].duration: '99999999h' is not a Go duration ...``)."""
    problems = []
    for err in exc.errors():
        path = ""
        for part in err["loc"]:
            path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
        message = str(err["msg"]).removeprefix("Value error, ")
        problems.append(f"{path or '(object)'}: {message}")
    return problems


@dataclass(frozen=True)
class Rule:
    """One CEL rule of ``x-kubernetes-validations`` with the message the API server returns."""

    rule: str
    message: str

    def as_dict(self) -> dict[str, str]:
        """The rule as it appears in a CRD."""
        return {"message": self.message, "rule": self.rule}


def validations(*rules: Rule, **extra: Any) -> dict[str, Any]:
    """``json_schema_extra`` carrying CEL rules (and any other schema keys in ``extra``)."""
    return {"x-kubernetes-validations": [r.as_dict() for r in rules], **extra}


class KubeModel(BaseModel):
    """A part of a Kubernetes object: camelCase on the wire, unknown keys dropped."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="ignore",
    )

    @model_serializer(mode="wrap")
    def _omit_empty(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Go's omitempty: an optional field that is None, {} or [] is not written, so a
        # default-constructed collection never turns into an explicit empty one.
        data = handler(self)
        if not isinstance(data, dict):
            return data
        optional = _optional_keys(type(self))
        return {
            k: v
            for k, v in data.items()
            if v is not None and not (k in optional and isinstance(v, dict | list) and not v)
        }

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready dictionary the API server expects (camelCase keys)."""
        data: dict[str, Any] = self.model_dump(mode="json")
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        """Parse a dictionary as read from the API server or a manifest."""
        return cls.model_validate(data)


@cache
def _optional_keys(cls: type[BaseModel]) -> frozenset[str]:
    keys: set[str] = set()
    for name, info in cls.model_fields.items():
        if not info.is_required():
            keys.add(name)
            keys.add(info.serialization_alias or info.alias or name)
    return frozenset(keys)


@dataclass(frozen=True)
class PrinterColumn:
    """A column of ``kubectl get`` (``additionalPrinterColumns``)."""

    name: str
    json_path: str
    type: Literal["string", "integer", "number", "boolean", "date"] = "string"
    priority: int = 0
    description: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The column as it appears in a CRD."""
        out: dict[str, Any] = {"jsonPath": self.json_path, "name": self.name}
        if self.description:
            out["description"] = self.description
        if self.priority:
            out["priority"] = self.priority
        out["type"] = self.type
        return out


@dataclass(frozen=True)
class CRDInfo:
    """What a CRD says about a kind besides its schema: names, scope, columns, subresources."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    scope: Literal["Cluster", "Namespaced"] = "Cluster"
    categories: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    status_subresource: bool = True
    #: The ``scale`` subresource as (specReplicasPath, statusReplicasPath), if any.
    scale: tuple[str, str] | None = None
    #: Top-level fields the schema requires (``spec`` for most kinds).
    required: tuple[str, ...] = ()
    #: Label keys this kind may not use in its label rules beyond every extension's.
    restricted_labels: tuple[str, ...] = ()
    #: Extra keys for ``metadata.annotations`` of the CRD object itself.
    annotations: dict[str, str] = field(default_factory=dict)
    #: Older versions still served with the same schema (not stored; the API server
    #: only rewrites ``apiVersion``), e.g. AKSNodeClass v1alpha2 beside v1beta1.
    served_versions: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        """``group/version`` as written in ``apiVersion``."""
        return f"{self.group}/{self.version}"

    @property
    def name(self) -> str:
        """The CRD object's name, ``plural.group``."""
        return f"{self.plural}.{self.group}"


class OwnerReference(KubeModel):
    """An object this one depends on; deleting the owner garbage-collects this object."""

    api_version: str = Field(alias="apiVersion")
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KubeModel):
    """Standard object metadata. Fields karpy does not model are kept as they are."""

    # metadata is not pruned by the API server, so neither do we drop what we don't know.
    model_config = ConfigDict(extra="allow")

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    finalizers: list[str] = Field(default_factory=list)
    owner_references: list[OwnerReference] = Field(default_factory=list)
    managed_fields: list[dict[str, Any]] = Field(default_factory=list)


class Resource(KubeModel):
    """A top-level object: ``apiVersion``, ``kind``, ``metadata``, ``spec``, ``status``.

    Subclasses set ``crd`` and pin ``apiVersion``/``kind`` with ``Literal`` defaults so
    that a manifest of another version fails to parse with a message naming it.
    """

    crd: ClassVar[CRDInfo]

    api_version: str = Field(alias="apiVersion")
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
