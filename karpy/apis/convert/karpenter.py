"""Converters for Karpenter's own kinds: v1beta1 NodePool and NodeClaim, and the
v1alpha5 Provisioner (which became the NodePool)."""

from __future__ import annotations

from typing import Any, Final

from karpy.apis.convert.common import carry_metadata, node_class_ref, seconds_to_duration
from karpy.apis.convert.fieldpath import copy_of
from karpy.apis.convert.types import ConversionContext, ConversionError, Converter, Document
from karpy.apis.labels import LABEL_NODEPOOL

__all__ = ["CONVERTERS"]

V1: Final = "karpenter.sh/v1"
_PROVISIONER_NAME_LABEL: Final = "karpenter.sh/provisioner-name"


def _copy(src: dict[str, Any], dst: dict[str, Any], *keys: str) -> None:
    for key in keys:
        if src.get(key) not in (None, [], {}):
            dst[key] = src[key]


def _kubelet(
    doc: Document, ctx: ConversionContext, kubelet: Any, ref: dict[str, str], field: str
) -> None:
    if not kubelet:
        return
    if not isinstance(kubelet, dict):
        raise ConversionError(f"{doc.get('kind')}: {field} is not a mapping")
    ctx.hand_kubelet_to_nodeclass(doc, (ref["group"], ref["kind"], ref["name"]), copy_of(kubelet))
    ctx.note(doc, f"{field} moved to {ref['kind']}/{ref['name']} spec.kubelet")


def _drop_status(doc: Document, ctx: ConversionContext) -> None:
    if doc.get("status"):
        ctx.note(doc, "dropped status (karpy recomputes it)")


def _requirements(
    doc: Document, ctx: ConversionContext, reqs: Any, field: str, *, in_nodepool: bool
) -> list[Any]:
    out = []
    for index, req in enumerate(reqs or []):
        req = copy_of(req)
        key = req.get("key")
        if key in (_PROVISIONER_NAME_LABEL, LABEL_NODEPOOL) and in_nodepool:
            # A NodePool's nodes carry karpenter.sh/nodepool=<its name> anyway, and v1
            # forbids requiring it in the NodePool itself.
            ctx.note(doc, f"dropped {field}[{index}] on {key}: every node gets {LABEL_NODEPOOL}")
            continue
        if key == _PROVISIONER_NAME_LABEL:
            ctx.note(doc, f"{field}[{index}]: key {key} is now {LABEL_NODEPOOL}")
            req["key"] = LABEL_NODEPOOL
        out.append(req)
    return out


def _convert_nodepool_v1beta1(doc: Document, ctx: ConversionContext) -> list[Document]:
    spec = doc.get("spec") or {}
    template = spec.get("template") or {}
    tspec = template.get("spec") or {}
    disruption = copy_of(spec.get("disruption") or {})

    ref = node_class_ref(
        doc, tspec.get("nodeClassRef"), ctx, field="spec.template.spec.nodeClassRef"
    )
    new_tspec: dict[str, Any] = {}
    _copy(tspec, new_tspec, "taints", "startupTaints")
    new_tspec["requirements"] = _requirements(
        doc, ctx, tspec.get("requirements"), "spec.template.spec.requirements", in_nodepool=True
    )
    new_tspec["nodeClassRef"] = ref
    _kubelet(doc, ctx, tspec.get("kubelet"), ref, "spec.template.spec.kubelet")
    if tspec.get("resources"):
        ctx.note(doc, "dropped spec.template.spec.resources (NodePools do not set requests in v1)")
    if "expireAfter" in disruption:
        new_tspec["expireAfter"] = disruption.pop("expireAfter")
        ctx.note(doc, "spec.disruption.expireAfter moved to spec.template.spec.expireAfter")

    new_disruption: dict[str, Any] = {}
    policy = disruption.get("consolidationPolicy", "WhenUnderutilized")
    if policy == "WhenUnderutilized":
        new_disruption["consolidationPolicy"] = "WhenEmptyOrUnderutilized"
        if "consolidationPolicy" in disruption:
            ctx.note(
                doc,
                "spec.disruption.consolidationPolicy WhenUnderutilized is now "
                "WhenEmptyOrUnderutilized",
            )
        after = disruption.get("consolidateAfter")
        # v1beta1 only allowed Never with WhenUnderutilized (consolidation off); keep it.
        new_disruption["consolidateAfter"] = "Never" if after == "Never" else "0s"
    elif policy == "WhenEmpty":
        new_disruption["consolidationPolicy"] = "WhenEmpty"
        _copy(disruption, new_disruption, "consolidateAfter")
    else:
        raise ConversionError(
            f"{doc.get('kind')}/{(doc.get('metadata') or {}).get('name')}: "
            f"spec.disruption.consolidationPolicy {policy!r} is not a v1beta1 policy "
            "(WhenEmpty or WhenUnderutilized)"
        )
    _copy(disruption, new_disruption, "budgets")

    new_template: dict[str, Any] = {}
    _copy(template, new_template, "metadata")
    new_template["spec"] = new_tspec
    new_spec: dict[str, Any] = {"template": new_template, "disruption": new_disruption}
    _copy(spec, new_spec, "limits", "weight")
    _drop_status(doc, ctx)
    return [
        {
            "apiVersion": V1,
            "kind": "NodePool",
            "metadata": carry_metadata(doc, ctx),
            "spec": new_spec,
        }
    ]


def _convert_nodeclaim_v1beta1(doc: Document, ctx: ConversionContext) -> list[Document]:
    spec = doc.get("spec") or {}
    ref = node_class_ref(doc, spec.get("nodeClassRef"), ctx, field="spec.nodeClassRef")
    new_spec: dict[str, Any] = {}
    _copy(spec, new_spec, "taints", "startupTaints")
    new_spec["requirements"] = _requirements(
        doc, ctx, spec.get("requirements"), "spec.requirements", in_nodepool=False
    )
    _copy(spec, new_spec, "resources")
    new_spec["nodeClassRef"] = ref
    if spec.get("kubelet"):
        ctx.note(
            doc,
            "dropped spec.kubelet: in v1 it is set on the NodeClass and a NodeClaim's spec "
            "cannot change; convert its NodePool and NodeClass instead",
        )
    ctx.note(
        doc, "spec.expireAfter is new in v1 and defaults to 720h; set it to match the NodePool"
    )
    _drop_status(doc, ctx)
    return [
        {
            "apiVersion": V1,
            "kind": "NodeClaim",
            "metadata": carry_metadata(doc, ctx),
            "spec": new_spec,
        }
    ]


def _convert_provisioner_v1alpha5(doc: Document, ctx: ConversionContext) -> list[Document]:
    spec = copy_of(doc.get("spec") or {})
    if spec.get("provider"):
        raise ConversionError(
            f"Provisioner/{(doc.get('metadata') or {}).get('name')}: spec.provider (an inline "
            "provider configuration) has no v1 form; move it into a NodeClass (for AWS an "
            "AWSNodeTemplate or EC2NodeClass), set spec.providerRef to it and convert again"
        )
    ref = node_class_ref(doc, spec.get("providerRef"), ctx, field="spec.providerRef")
    template_meta: dict[str, Any] = {}
    _copy(spec, template_meta, "labels", "annotations")
    tspec: dict[str, Any] = {}
    _copy(spec, tspec, "taints", "startupTaints")
    tspec["requirements"] = _requirements(
        doc, ctx, spec.get("requirements"), "spec.requirements", in_nodepool=True
    )
    tspec["nodeClassRef"] = ref
    ctx.note(doc, "spec.providerRef is now spec.template.spec.nodeClassRef")
    if template_meta:
        ctx.note(doc, "spec.labels/annotations moved to spec.template.metadata")
    kubelet = copy_of(spec.get("kubeletConfiguration") or {})
    if kubelet.pop("containerRuntime", None) is not None:
        ctx.note(doc, "dropped spec.kubeletConfiguration.containerRuntime (containerd only)")
    _kubelet(doc, ctx, kubelet, ref, "spec.kubeletConfiguration")

    ttl_expired = spec.get("ttlSecondsUntilExpired")
    tspec["expireAfter"] = "Never" if ttl_expired is None else seconds_to_duration(ttl_expired)
    ctx.note(
        doc,
        f"spec.ttlSecondsUntilExpired is now template.spec.expireAfter {tspec['expireAfter']}",
    )

    disruption: dict[str, Any]
    if (spec.get("consolidation") or {}).get("enabled"):
        disruption = {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}
        if spec.get("ttlSecondsAfterEmpty") is not None:
            ctx.note(
                doc, "dropped spec.ttlSecondsAfterEmpty: consolidation also removes empty nodes"
            )
        ctx.note(
            doc, "spec.consolidation.enabled became consolidationPolicy WhenEmptyOrUnderutilized"
        )
    elif spec.get("ttlSecondsAfterEmpty") is not None:
        after = seconds_to_duration(spec["ttlSecondsAfterEmpty"])
        disruption = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": after}
        ctx.note(
            doc,
            f"spec.ttlSecondsAfterEmpty is now WhenEmpty with consolidateAfter {after}",
        )
    else:
        disruption = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}
        ctx.note(
            doc, "no consolidation or ttlSecondsAfterEmpty: consolidateAfter Never keeps nodes"
        )

    new_spec: dict[str, Any] = {"template": {"spec": tspec}, "disruption": disruption}
    if template_meta:
        new_spec["template"] = {"metadata": template_meta, "spec": tspec}
    limits = (spec.get("limits") or {}).get("resources")
    if limits:
        new_spec["limits"] = limits
        ctx.note(doc, "spec.limits.resources is now spec.limits")
    _copy(spec, new_spec, "weight")
    _drop_status(doc, ctx)
    return [
        {
            "apiVersion": V1,
            "kind": "NodePool",
            "metadata": carry_metadata(doc, ctx),
            "spec": new_spec,
        }
    ]


CONVERTERS: Final = (
    Converter("karpenter.sh/v1beta1", "NodePool", _convert_nodepool_v1beta1),
    Converter("karpenter.sh/v1beta1", "NodeClaim", _convert_nodeclaim_v1beta1),
    Converter(
        "karpenter.sh/v1alpha5",
        "Provisioner",
        _convert_provisioner_v1alpha5,
        output_kind="NodePool",
    ),
)
