"""CapacityBuffer (``autoscaling.x-k8s.io/v1beta1``): spare capacity, described as a
number of "chunks" shaped like one pod, that the autoscaler keeps provisioned ahead of
demand. The schema follows Cluster Autoscaler's API (which Karpenter v1.14 serves
unchanged), field for field and rule for rule.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import ConfigDict, Field

from karpy.apis.core import ConditionList, ObjectMeta, Resource
from karpy.apis.model import CRDInfo, KubeModel, PrinterColumn, ResourceList, Rule, validations

__all__ = [
    "ACTIVE_PROVISIONING_STRATEGY",
    "ANNOTATION_BUFFER_NAME",
    "ANNOTATION_BUFFER_NAMESPACE",
    "ANNOTATION_FAKE_POD",
    "CONDITION_LIMITED_BY_QUOTAS",
    "CONDITION_PROVISIONING",
    "CONDITION_READY_FOR_PROVISIONING",
    "SCALABLE_KINDS",
    "CapacityBuffer",
    "CapacityBufferSpec",
    "CapacityBufferStatus",
    "LocalObjectRef",
    "ScalableRef",
]

GROUP: Final = "autoscaling.x-k8s.io"
ACTIVE_PROVISIONING_STRATEGY: Final = "buffer.x-k8s.io/active-capacity"
"""The default (and only acted-on) strategy: provision capacity for the chunks."""
CONDITION_READY_FOR_PROVISIONING: Final = "ReadyForProvisioning"
CONDITION_PROVISIONING: Final = "Provisioning"
CONDITION_LIMITED_BY_QUOTAS: Final = "LimitedByQuotas"
ANNOTATION_FAKE_POD: Final = "karpenter.sh/capacity-buffer-fake-pod"
"""Marks a virtual pod built from a CapacityBuffer (Karpenter's FakePodAnnotationKey)."""
ANNOTATION_BUFFER_NAME: Final = "karpenter.sh/capacity-buffer-name"
ANNOTATION_BUFFER_NAMESPACE: Final = "karpenter.sh/capacity-buffer-namespace"
SCALABLE_KINDS: Final = ("Deployment", "ReplicaSet", "StatefulSet")
"""The ``apps`` kinds a scalableRef may name (Karpenter's supported set)."""


class LocalObjectRef(KubeModel):
    """An object in the CapacityBuffer's namespace, by name."""

    name: str = Field(min_length=1, description="The referent's name.")


class ScalableRef(KubeModel):
    """A workload with a scale subresource (Deployment, ReplicaSet, StatefulSet)."""

    api_group: str | None = Field(
        None, description='The referent\'s API group ("" or unset for the core group).'
    )
    kind: str = Field(min_length=1, description="The referent's kind.")
    name: str = Field(min_length=1, description="The referent's name.")


class CapacityBufferSpec(KubeModel):
    """How big a buffer is and what one chunk of it looks like."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            Rule(
                "!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)",
                "If podTemplateRef is set, replicas or limits must also be set",
            ),
            Rule(
                "!(has(self.podTemplateRef) && has(self.scalableRef))",
                "You must define either PodTemplateRef or ScalableRef, but not both",
            ),
        )
    )

    provisioning_strategy: str | None = Field(
        None,
        description=(
            "How the buffer is used; buffer.x-k8s.io/active-capacity (the default) "
            "provisions capacity for its chunks as if they were pending pods."
        ),
        json_schema_extra={"default": ACTIVE_PROVISIONING_STRATEGY},
    )
    pod_template_ref: LocalObjectRef | None = Field(
        None,
        description=(
            "A PodTemplate in the buffer's namespace giving the shape of one chunk. "
            "Exactly one of podTemplateRef and scalableRef."
        ),
    )
    scalable_ref: ScalableRef | None = Field(
        None,
        description=(
            "A workload (apps Deployment, ReplicaSet or StatefulSet) whose pod template "
            "gives the shape of one chunk and whose replicas percentage refers to."
        ),
    )
    replicas: int | None = Field(
        None,
        ge=0,
        description=(
            "How many chunks. With percentage the larger of the two counts; limits cap "
            "either. Neither set: as many chunks as fit in limits."
        ),
        json_schema_extra={"format": "int32"},
    )
    percentage: int | None = Field(
        None,
        ge=0,
        description=(
            "Chunks as a percentage of the scalableRef's replicas, rounded up (at least "
            "1 when both are above 0). Only with scalableRef."
        ),
        json_schema_extra={"format": "int32"},
    )
    limits: ResourceList = Field(
        default_factory=dict,
        description="Upper bound on the chunks' summed requests (cpu, memory, ...).",
    )


class CapacityBufferStatus(KubeModel):
    """What the autoscaler resolved and provisioned for the buffer."""

    pod_template_ref: LocalObjectRef | None = Field(
        None, description="The PodTemplate the chunks were built from (podTemplateRef)."
    )
    replicas: int | None = Field(
        None,
        description="The number of chunks the autoscaler keeps capacity for.",
        json_schema_extra={"format": "int32"},
    )
    pod_template_generation: int | None = Field(
        None,
        description="The PodTemplate's metadata.generation the status was computed from.",
        json_schema_extra={"format": "int64"},
    )
    conditions: ConditionList = Field(
        default_factory=list,
        description=(
            "ReadyForProvisioning (the chunk's shape resolved) and Provisioning (True "
            "when every chunk fits existing capacity)."
        ),
    )
    provisioning_strategy: str | None = Field(
        None, description="The provisioning strategy in effect."
    )


class CapacityBuffer(Resource):
    """Spare capacity kept provisioned ahead of demand, as a number of pod-shaped chunks."""

    crd = CRDInfo(
        group=GROUP,
        version="v1beta1",
        kind="CapacityBuffer",
        plural="capacitybuffers",
        singular="capacitybuffer",
        scope="Namespaced",
        categories=("autoscaling",),
        short_names=("cb",),
        required=("spec",),
        printer_columns=(
            PrinterColumn("Strategy", ".spec.provisioningStrategy",
                          description="The strategy to be used."),
            PrinterColumn("PodTemplate", ".status.podTemplateRef.name",
                          description="The name of the PodTemplate used."),
            PrinterColumn("Replicas", ".status.replicas", "integer",
                          description="The actual number of buffer chunks."),
            PrinterColumn("ConditionsType", ".status.conditions[*].type",
                          description="List of all condition types."),
            PrinterColumn("ConditionsStatus", ".status.conditions[*].status",
                          description="List of all condition statuses."),
            PrinterColumn("ConditionsReason", ".status.conditions[*].reason",
                          description="List of all condition reasons."),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date",
                          description="The age of the CapacityBuffer."),
        ),
    )  # fmt: skip

    api_version: Literal["autoscaling.x-k8s.io/v1beta1"] = Field(
        "autoscaling.x-k8s.io/v1beta1", alias="apiVersion"
    )
    kind: Literal["CapacityBuffer"] = "CapacityBuffer"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CapacityBufferSpec = Field(description="The buffer's size and chunk shape.")
    status: CapacityBufferStatus = Field(default_factory=CapacityBufferStatus)
