"""Shapes borrowed from Kubernetes' own APIs (meta/v1 and core/v1) that Karpenter's
kinds embed: object metadata, taints, node selector requirements and status conditions."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from karpy.apis.model import KubeModel, ObjectMeta, OwnerReference, Resource

__all__ = [
    "LABEL_KEY_PATTERN",
    "LABEL_VALUE_PATTERN",
    "Condition",
    "ConditionList",
    "ConditionStatus",
    "LabelValue",
    "NodeSelectorRequirement",
    "ObjectMeta",
    "OwnerReference",
    "Resource",
    "Taint",
    "TaintEffect",
]

#: A qualified label key: an optional DNS-subdomain prefix and a name (also a taint key).
LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?"
    r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
)
#: A label value: empty, or up to 63 alphanumerics, '-', '_' and '.', alphanumeric at the ends.
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"

LabelValue = Annotated[str, Field(max_length=63, pattern=LABEL_VALUE_PATTERN)]

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
ConditionStatus = Literal["True", "False", "Unknown"]


class Taint(KubeModel):
    """A taint: the node repels pods that do not tolerate it.

    Immutable and hashable, so taints can be compared as sets.
    """

    model_config = ConfigDict(frozen=True)

    key: str = Field(
        min_length=1,
        pattern=LABEL_KEY_PATTERN,
        description="The taint key to be applied to a node.",
    )
    value: str | None = Field(
        None,
        pattern=LABEL_KEY_PATTERN,
        description="The taint value corresponding to the taint key.",
    )
    effect: TaintEffect = Field(
        description=(
            "The effect of the taint on pods that do not tolerate it: "
            "NoSchedule, PreferNoSchedule or NoExecute."
        )
    )
    time_added: datetime | None = Field(
        None, description="When the taint was added (NoExecute taints only)."
    )


class NodeSelectorRequirement(KubeModel):
    """A plain core/v1 node selector requirement (key, operator, values)."""

    key: str = Field(description="The label key the requirement applies to.")
    operator: str = Field(description="How the key relates to the values.")
    values: Annotated[list[str], Field(json_schema_extra={"x-kubernetes-list-type": "atomic"})] = (
        Field(default_factory=list, description="The values the operator compares with.")
    )


class Condition(KubeModel):
    """One observation of an object's state (meta/v1 Condition)."""

    type: str = Field(
        max_length=316,
        pattern=(
            r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
            r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
        ),
        description="The condition's type, in CamelCase or foo.example.com/CamelCase.",
    )
    status: ConditionStatus = Field(description="True, False or Unknown.")
    observed_generation: int | None = Field(
        None,
        ge=0,
        description=(
            "The metadata.generation the condition was computed from; a smaller value "
            "than the object's generation means the condition is out of date."
        ),
        json_schema_extra={"format": "int64"},
    )
    last_transition_time: datetime = Field(
        description="When the status last changed from one value to another."
    )
    # The API server enforces the reason's shape; parsing stays lenient so that a
    # condition written by another controller never makes an object unreadable.
    reason: str = Field(
        "",
        max_length=1024,
        description="A CamelCase, machine-readable reason for the last transition.",
        json_schema_extra={
            "minLength": 1,
            "pattern": r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
            "x-karpy-required": True,
        },
    )
    message: str = Field(
        "",
        max_length=32768,
        description="A human-readable message about the last transition; may be empty.",
        json_schema_extra={"x-karpy-required": True},
    )


#: A ``status.conditions`` list: a map keyed by type, as Kubernetes lists conditions.
ConditionList = Annotated[
    list[Condition],
    Field(
        json_schema_extra={"x-kubernetes-list-map-keys": ["type"], "x-kubernetes-list-type": "map"}
    ),
]
