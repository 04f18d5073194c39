"""The ``karpenter.sh/v1alpha1`` NodeOverlay (Karpenter v1.7+, feature gate ``NodeOverlay``):
a change to the instance-type catalogue the scheduler sees, for the instance types (and
offerings) its requirements select.

``price`` replaces an offering's price, ``priceAdjustment`` moves it (``-0.5``,
``+10%``, ``-15%``), ``capacity`` adds extended resources the cloud does not report.
Overlays apply by ``weight`` (higher first; equal weights by name, later in the alphabet
first); two overlays of equal weight that change the same offering's price or the same
resource are in conflict: the later one is not applied and reports
``ValidationSucceeded=False`` with reason ``Conflict``. The schema and CEL rules are
Karpenter's.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Final, Literal

from pydantic import Field

from karpy.apis.conditions import ConditionSet, utc_now
from karpy.apis.core import (
    LABEL_KEY_PATTERN,
    Condition,
    ConditionList,
    LabelValue,
    ObjectMeta,
    Resource,
)
from karpy.apis.labels import GROUP, LABEL_CAPACITY_TYPE, LABEL_HOSTNAME, LABEL_NODEPOOL
from karpy.apis.model import (
    CRDInfo,
    KubeModel,
    PrinterColumn,
    ResourceList,
    Rule,
    go_pattern,
    validations,
)
from karpy.apis.v1.nodeclaim import Operator

__all__ = [
    "CONDITION_VALIDATION_SUCCEEDED",
    "REASON_CONFLICT",
    "REASON_RUNTIME_VALIDATION",
    "RESTRICTED_CAPACITY",
    "NodeOverlay",
    "NodeOverlaySpec",
    "NodeOverlayStatus",
    "NodeSelectorRequirement",
]

CONDITION_VALIDATION_SUCCEEDED: Final = "ValidationSucceeded"
#: ValidationSucceeded=False: another overlay of the same weight changes the same thing.
REASON_CONFLICT: Final = "Conflict"
#: ValidationSucceeded=False: a rule the CRD cannot express failed.
REASON_RUNTIME_VALIDATION: Final = "RuntimeValidation"
#: Resources ``capacity`` may not name: an overlay only adds extended resources.
RESTRICTED_CAPACITY: Final = ("cpu", "memory", "ephemeral-storage", "pods")

_INTEGER_OPERATORS = (
    "x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte'"
)


class NodeSelectorRequirement(KubeModel):
    """A label key, an operator and values, selecting the instance types an overlay
    changes (well-known labels, ``karpenter.sh/nodepool`` and a NodePool's own labels)."""

    key: str = Field(
        max_length=316,
        pattern=LABEL_KEY_PATTERN,
        description="The label key the requirement applies to.",
        json_schema_extra=validations(
            Rule(
                f'self in ["{LABEL_CAPACITY_TYPE}", "{LABEL_NODEPOOL}"] || '
                f'!self.find("^([^/]+)").endsWith("{GROUP}")',
                f'label domain "{GROUP}" is restricted',
            ),
            Rule(f'self != "{LABEL_HOSTNAME}"', f'label "{LABEL_HOSTNAME}" is restricted'),
        ),
    )
    operator: Operator = Field(
        description=(
            "How the key relates to the values: In, NotIn, Exists, DoesNotExist, Gt, Lt, "
            "Gte or Lte."
        ),
        json_schema_extra={"x-karpy-required": True},
    )
    values: Annotated[
        list[LabelValue], Field(json_schema_extra={"x-kubernetes-list-type": "atomic"})
    ] = Field(
        default_factory=list,
        description=(
            "The values. In and NotIn need at least one, Exists and DoesNotExist none, "
            "Gt, Lt, Gte and Lte exactly one integer."
        ),
    )


class NodeOverlaySpec(KubeModel):
    """Which instance types the overlay selects and what it changes about them."""

    requirements: Annotated[
        list[NodeSelectorRequirement],
        Field(
            max_length=100,
            json_schema_extra=validations(
                Rule(
                    "self.all(x, x.operator == 'NotIn' ? x.values.size() != 0 : true)",
                    "requirements with operator 'NotIn' must have a value defined",
                ),
                Rule(
                    "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
                    "requirements with operator 'In' must have a value defined",
                ),
                Rule(
                    f"self.all(x, ({_INTEGER_OPERATORS}) ? "
                    "(x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
                    "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single "
                    "positive integer value",
                ),
                **{"x-kubernetes-list-type": "atomic"},
            ),
        ),
    ] = Field(
        description=(
            "Selects the instance types (and offerings) the overlay changes: well-known "
            "labels such as node.kubernetes.io/instance-type, karpenter.sh/capacity-type "
            "or karpenter.sh/nodepool, and labels from a NodePool's spec.template.labels."
        )
    )
    price_adjustment: str | None = Field(
        None,
        pattern=go_pattern(
            r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$"
        ),
        description=(
            "Changes the price of the selected offerings: a signed amount (-0.5, +1.2) or "
            "a signed percentage (+10%, -15%). A price never goes below 0."
        ),
    )
    price: str | None = Field(
        None,
        pattern=go_pattern(r"^\d+(\.\d+)?$"),
        description="Replaces the price per hour of the selected offerings.",
    )
    capacity: ResourceList = Field(
        default_factory=dict,
        description=(
            "Extended resources added to the selected instance types' capacity (e.g. "
            "hugepages-2Mi, example.com/device); cpu, memory, ephemeral-storage and pods "
            "may not be changed."
        ),
        json_schema_extra=validations(
            Rule(
                "self.all(x, !(x in ['cpu', 'memory', 'ephemeral-storage', 'pods']))",
                "invalid resource restricted",
            )
        ),
    )
    weight: int | None = Field(
        None,
        ge=1,
        le=10000,
        description=(
            "Precedence: overlays with a higher weight apply first and win; unset counts "
            "as 0. Equal weights apply in reverse alphabetical order of their names."
        ),
        json_schema_extra={"format": "int32"},
    )


class NodeOverlayStatus(KubeModel):
    """Whether the overlay is applied."""

    conditions: ConditionList = Field(
        default_factory=list,
        description=(
            "ValidationSucceeded (False with reason Conflict or RuntimeValidation when "
            "the overlay is not applied) and Ready."
        ),
    )


class NodeOverlay(Resource):
    """A change to the price or capacity of the instance types its requirements select."""

    crd = CRDInfo(
        group=GROUP,
        version="v1alpha1",
        kind="NodeOverlay",
        plural="nodeoverlays",
        singular="nodeoverlay",
        categories=("karpenter",),
        short_names=("overlays",),
        required=("spec",),
        printer_columns=(
            PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
            PrinterColumn("Weight", ".spec.weight", "integer", priority=1),
        ),
    )

    api_version: Literal["karpenter.sh/v1alpha1"] = Field(
        "karpenter.sh/v1alpha1", alias="apiVersion"
    )
    kind: Literal["NodeOverlay"] = "NodeOverlay"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeOverlaySpec = Field(
        description="What the overlay selects and changes.",
        json_schema_extra=validations(
            Rule(
                "!has(self.price) || !has(self.priceAdjustment)",
                "cannot set both 'price' and 'priceAdjustment'",
            )
        ),
    )
    status: NodeOverlayStatus = Field(default_factory=NodeOverlayStatus)

    def status_conditions(
        self, *, now: Callable[[], datetime] = utc_now
    ) -> ConditionSet[Condition]:
        """The overlay's conditions: Ready follows ValidationSucceeded."""
        return ConditionSet.of(
            self.metadata,
            self.status.conditions,
            Condition,
            dependents=(CONDITION_VALIDATION_SUCCEEDED,),
            now=now,
        )
