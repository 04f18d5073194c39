"""``karpy convert`` for AKSNodeClass: v1alpha2 becomes v1beta1 (the same schema), and
kubelet settings taken off a v1beta1 NodePool land on the AKSNodeClass it references."""

from __future__ import annotations

from typing import Any, Final

from karpy.apis.convert.common import carry_metadata
from karpy.apis.convert.fieldpath import copy_of
from karpy.apis.convert.types import ConversionContext, Converter, Document
from karpy_azure.apis.labels import GROUP

__all__ = ["CONVERTERS"]

V1BETA1: Final = GROUP + "/v1beta1"
# NodePool kubelet fields the AKSNodeClass kubelet has too.
_SHARED_KUBELET_FIELDS: Final = (
    "cpuCFSQuota",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
)


def _apply_kubelet(doc: Document, ctx: ConversionContext, spec: dict[str, Any]) -> None:
    name = str((doc.get("metadata") or {}).get("name"))
    pending = ctx.take_kubelet((GROUP, "AKSNodeClass", name))
    if pending is None:
        return
    kubelet = copy_of(pending.kubelet)
    if "maxPods" in kubelet:
        spec["maxPods"] = kubelet.pop("maxPods")
        ctx.note(doc, f"spec.maxPods set from kubelet.maxPods of {pending.source}")
    shared = {k: kubelet.pop(k) for k in _SHARED_KUBELET_FIELDS if k in kubelet}
    if shared:
        spec["kubelet"] = {**(spec.get("kubelet") or {}), **shared}
        ctx.note(doc, f"spec.kubelet {', '.join(sorted(shared))} set from {pending.source}")
    if kubelet:
        ctx.note(
            doc,
            f"dropped kubelet {', '.join(sorted(kubelet))} of {pending.source}: "
            "AKSNodeClass has no such settings",
        )


def _convert(doc: Document, ctx: ConversionContext) -> list[Document]:
    spec = copy_of(doc.get("spec") or {})
    if doc.get("apiVersion") != V1BETA1:
        ctx.note(doc, f"apiVersion is now {V1BETA1} (same schema)")
    before = copy_of(spec)
    _apply_kubelet(doc, ctx, spec)
    if doc.get("apiVersion") == V1BETA1 and spec == before:
        return [doc]  # current and untouched: pass through unchanged
    if doc.get("status"):
        ctx.note(doc, "dropped status (karpy recomputes it)")
    return [
        {
            "apiVersion": V1BETA1,
            "kind": "AKSNodeClass",
            "metadata": carry_metadata(doc, ctx),
            "spec": spec,
        }
    ]


CONVERTERS: Final = (
    Converter(GROUP + "/v1alpha2", "AKSNodeClass", _convert, phase=1),
    Converter(V1BETA1, "AKSNodeClass", _convert, phase=1),
)
