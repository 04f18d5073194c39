"""The ``karpy.dev/v1alpha1`` ClusterLimit: a cap on what several NodePools launch
together -- the whole cluster's cpu, memory, nodes or any resource, or those of the
NodePools a label selector picks.

A NodePool's ``spec.limits`` caps that pool alone; a platform team with one pool per
team or per capacity type has no way to cap their sum (kubernetes-sigs/karpenter #745,
#1747). A ClusterLimit is counted and honoured exactly as a NodePool's limits are: its
usage is the capacity of every launched machine of the pools it selects that is not
being deleted, plus one ``nodes`` each; no NodeClaim is planned whose instance types
could take that usage past a limit, by provisioning or by disruption's replacements.
Its status lists the pools it selects and what they use.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from karpy.apis.core import LABEL_KEY_PATTERN, ConditionList, ObjectMeta, Resource
from karpy.apis.model import CRDInfo, KubeModel, PrinterColumn, ResourceList

__all__ = [
    "CONDITION_LIMIT_REACHED",
    "CONDITION_READY",
    "GROUP",
    "ClusterLimit",
    "ClusterLimitSpec",
    "ClusterLimitStatus",
    "LabelSelector",
    "LabelSelectorRequirement",
]

GROUP: Final = "karpy.dev"
CONDITION_READY: Final = "Ready"
CONDITION_LIMIT_REACHED: Final = "LimitReached"


class LabelSelectorRequirement(KubeModel):
    """One expression of a label selector (metav1.LabelSelectorRequirement)."""

    key: str = Field(
        max_length=316, pattern=LABEL_KEY_PATTERN, description="The label key."
    )
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(
        description="In, NotIn, Exists or DoesNotExist."
    )
    values: list[str] | None = Field(
        None,
        description="The values for In and NotIn (non-empty); empty for Exists and "
        "DoesNotExist.",
    )


class LabelSelector(KubeModel):
    """Labels a NodePool must have (metav1.LabelSelector): every ``matchLabels`` pair
    and every expression; an empty selector selects every NodePool."""

    match_labels: dict[str, str] | None = Field(
        None, description="Labels the NodePool must carry, with these values."
    )
    match_expressions: list[LabelSelectorRequirement] | None = Field(
        None, description="Expressions the NodePool's labels must satisfy (ANDed)."
    )


class ClusterLimitSpec(KubeModel):
    """Which NodePools share the limits, and the limits."""

    node_pool_selector: LabelSelector | None = Field(
        None,
        description=(
            "The NodePools (by their metadata.labels) whose machines count against the "
            "limits. Unset or empty: every NodePool of the cluster."
        ),
    )
    limits: ResourceList = Field(
        description=(
            "The most the selected NodePools may launch together: the sum of their "
            "machines' capacity per resource (cpu, memory, nvidia.com/gpu, ...) and "
            "'nodes', the number of machines. Honoured like a NodePool's spec.limits."
        ),
        json_schema_extra={"minProperties": 1},
    )


class ClusterLimitStatus(KubeModel):
    """What the selected NodePools use against the limits."""

    node_pools: list[str] = Field(
        default_factory=list, description="The NodePools the selector picks, by name."
    )
    resources: ResourceList = Field(
        default_factory=dict,
        description=(
            "The capacity of the selected NodePools' machines that are not being "
            "deleted, per resource, and 'nodes', the number of machines."
        ),
    )
    conditions: ConditionList = Field(
        default_factory=list,
        description=(
            "Ready (True once the selector and limits are read), and LimitReached "
            "(True while the selected NodePools use all of a limit, naming it)."
        ),
    )


class ClusterLimit(Resource):
    """A cap on what the NodePools it selects launch together."""

    crd = CRDInfo(
        group=GROUP,
        version="v1alpha1",
        kind="ClusterLimit",
        plural="clusterlimits",
        singular="clusterlimit",
        categories=("karpy",),
        required=("spec",),
        printer_columns=(
            PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
            PrinterColumn("CPU", ".status.resources.cpu"),
            PrinterColumn("Memory", ".status.resources.memory"),
            PrinterColumn("Nodes", ".status.resources.nodes"),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
        ),
    )

    api_version: Literal["karpy.dev/v1alpha1"] = Field(
        "karpy.dev/v1alpha1", alias="apiVersion"
    )
    kind: Literal["ClusterLimit"] = "ClusterLimit"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ClusterLimitSpec = Field(description="The NodePools it covers and their limits.")
    status: ClusterLimitStatus = Field(default_factory=ClusterLimitStatus)
