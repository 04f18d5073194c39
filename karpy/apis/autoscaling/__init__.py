"""Cluster Autoscaler's ``autoscaling.x-k8s.io`` API as Karpenter serves it: the
CapacityBuffer (v1beta1), headroom kept as placeholder pods (Karpenter's
``CapacityBuffer`` feature gate, v1.14).

The constants are Karpenter's and Cluster Autoscaler's names: condition types and
reasons, the provisioning strategy, and the annotations a virtual pod carries.
"""

from karpy.apis.autoscaling.capacitybuffer import (
    ACTIVE_PROVISIONING_STRATEGY,
    ANNOTATION_BUFFER_NAME,
    ANNOTATION_BUFFER_NAMESPACE,
    ANNOTATION_FAKE_POD,
    CONDITION_LIMITED_BY_QUOTAS,
    CONDITION_PROVISIONING,
    CONDITION_READY_FOR_PROVISIONING,
    SCALABLE_KINDS,
    CapacityBuffer,
    CapacityBufferSpec,
    CapacityBufferStatus,
    LocalObjectRef,
    ScalableRef,
)

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
