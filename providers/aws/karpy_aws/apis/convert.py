"""``karpy convert`` for the AWS kinds: the v1beta1 EC2NodeClass and the v1alpha1
AWSNodeTemplate (which became the EC2NodeClass), following Karpenter's own v1 conversion."""

from __future__ import annotations

from typing import Any, Final

from karpy.apis.convert.common import carry_metadata
from karpy.apis.convert.fieldpath import copy_of
from karpy.apis.convert.types import (
    ConversionContext,
    ConversionError,
    Converter,
    Document,
    describe,
)
from karpy_aws.apis.labels import (
    AMI_FAMILY_BY_ALIAS,
    AMI_FAMILY_CUSTOM,
    AMI_FAMILY_UBUNTU,
    GROUP,
)

__all__ = ["CONVERTERS"]

V1: Final = GROUP + "/v1"
_ALIAS_BY_FAMILY: Final = {family: alias for alias, family in AMI_FAMILY_BY_ALIAS.items()}
_UNCHANGED_FIELDS: Final = (
    "subnetSelectorTerms",
    "securityGroupSelectorTerms",
    "role",
    "instanceProfile",
    "userData",
    "tags",
    "blockDeviceMappings",
    "instanceStorePolicy",
    "detailedMonitoring",
    "associatePublicIPAddress",
    "metadataOptions",
    "context",
)
# What Karpenter gave an Ubuntu node class without block devices when converting it.
_UBUNTU_ROOT_VOLUME: Final = {
    "deviceName": "/dev/sda1",
    "rootVolume": True,
    "ebs": {"encrypted": True, "volumeType": "gp3", "volumeSize": "20Gi"},
}


def _ami_terms(
    doc: Document,
    ctx: ConversionContext,
    family: str | None,
    terms: list[Any],
    spec: dict[str, Any],
) -> None:
    """Set amiFamily/amiSelectorTerms of the v1 ``spec`` from a v1beta1 family and terms."""
    subject = describe(doc)
    if family in _ALIAS_BY_FAMILY:
        if terms:
            spec["amiFamily"] = family
            spec["amiSelectorTerms"] = terms
        else:
            alias = f"{_ALIAS_BY_FAMILY[family]}@latest"
            spec["amiSelectorTerms"] = [{"alias": alias}]
            ctx.note(
                doc,
                f"spec.amiFamily {family} without amiSelectorTerms is now amiSelectorTerms "
                f"[{{alias: {alias}}}] (pin a version, e.g. {_ALIAS_BY_FAMILY[family]}@v20240807, "
                "to avoid drift on every AMI release)",
            )
    elif family == AMI_FAMILY_UBUNTU:
        if not terms:
            raise ConversionError(
                f"{subject}: spec.amiFamily Ubuntu is not supported in v1 and there are no "
                "amiSelectorTerms to keep; choose AMIs (amiSelectorTerms with amiFamily "
                "Custom or AL2) or an alias such as al2023@latest, and convert again"
            )
        spec["amiFamily"] = "AL2"
        spec["amiSelectorTerms"] = terms
        ctx.note(
            doc,
            "spec.amiFamily Ubuntu is not supported in v1: now AL2 (its user data format) with "
            "your amiSelectorTerms; check the AMIs bootstrap with AL2 user data",
        )
        if not spec.get("blockDeviceMappings"):
            spec["blockDeviceMappings"] = [_UBUNTU_ROOT_VOLUME]
            ctx.note(doc, "added Ubuntu's default root volume (/dev/sda1, 20Gi gp3, encrypted)")
    else:
        if not terms:
            raise ConversionError(
                f"{subject}: spec.amiFamily {family or 'Custom'} needs amiSelectorTerms; "
                "add them and convert again"
            )
        spec["amiFamily"] = AMI_FAMILY_CUSTOM
        spec["amiSelectorTerms"] = terms
        if family != AMI_FAMILY_CUSTOM:
            ctx.note(doc, f"spec.amiFamily {family!r} is now Custom")


def _kubelet(doc: Document, ctx: ConversionContext, spec: dict[str, Any]) -> None:
    name = str((doc.get("metadata") or {}).get("name"))
    pending = ctx.take_kubelet((GROUP, "EC2NodeClass", name))
    if pending is not None:
        spec["kubelet"] = pending.kubelet
        ctx.note(doc, f"spec.kubelet set from {pending.source}")


def _finish(doc: Document, ctx: ConversionContext, spec: dict[str, Any]) -> list[Document]:
    if doc.get("status"):
        ctx.note(doc, "dropped status (karpy recomputes it)")
    ordered = {k: spec[k] for k in sorted(spec, key=_field_order)}
    return [
        {
            "apiVersion": V1,
            "kind": "EC2NodeClass",
            "metadata": carry_metadata(doc, ctx),
            "spec": ordered,
        }
    ]


_ORDER: Final = (
    "amiFamily",
    "amiSelectorTerms",
    "subnetSelectorTerms",
    "securityGroupSelectorTerms",
    "role",
    "instanceProfile",
    "kubelet",
)


def _field_order(key: str) -> tuple[int, str]:
    return (_ORDER.index(key) if key in _ORDER else len(_ORDER), key)


def _convert_ec2nodeclass_v1beta1(doc: Document, ctx: ConversionContext) -> list[Document]:
    old = copy_of(doc.get("spec") or {})
    spec: dict[str, Any] = {
        k: old[k] for k in _UNCHANGED_FIELDS if old.get(k) not in (None, [], {})
    }
    terms = [copy_of(t) for t in old.get("amiSelectorTerms") or []]
    _ami_terms(doc, ctx, old.get("amiFamily"), terms, spec)
    _kubelet(doc, ctx, spec)
    return _finish(doc, ctx, spec)


def _split(value: Any) -> list[str]:
    return [v.strip() for v in str(value).split(",") if v.strip()]


def _selector_terms(
    doc: Document, ctx: ConversionContext, selector: dict[str, Any] | None, field: str, new: str
) -> list[dict[str, Any]]:
    selector = copy_of(selector or {})
    ids = [*_split(selector.pop("aws-ids", "")), *_split(selector.pop("aws::ids", ""))]
    terms: list[dict[str, Any]] = [{"id": i} for i in ids]
    if selector:
        terms.append({"tags": {k: str(v) for k, v in selector.items()}})
    ctx.note(doc, f"spec.{field} is now spec.{new}")
    return terms


def _ami_selector_terms(
    doc: Document, ctx: ConversionContext, selector: dict[str, Any] | None
) -> list[dict[str, Any]]:
    selector = copy_of(selector or {})
    if not selector:
        return []
    ids = [*_split(selector.pop("aws-ids", "")), *_split(selector.pop("aws::ids", ""))]
    name = selector.pop("aws::name", None)
    owners = _split(selector.pop("aws::owners", ""))
    terms: list[dict[str, Any]] = [{"id": i} for i in ids]
    base: dict[str, Any] = {}
    if name is not None:
        base["name"] = str(name)
    if selector:
        base["tags"] = {k: str(v) for k, v in selector.items()}
    if base or owners:
        terms.extend([{**base, "owner": owner} for owner in owners] if owners else [base])
    ctx.note(doc, "spec.amiSelector is now spec.amiSelectorTerms")
    return terms


def _convert_awsnodetemplate_v1alpha1(doc: Document, ctx: ConversionContext) -> list[Document]:
    old = copy_of(doc.get("spec") or {})
    subject = describe(doc)
    if old.get("launchTemplate"):
        raise ConversionError(
            f"{subject}: spec.launchTemplate (a user-managed launch template) has no v1 form; "
            "express it as userData, blockDeviceMappings, metadataOptions and tags, remove it, "
            "and convert again"
        )
    if not old.get("instanceProfile"):
        raise ConversionError(
            f"{subject}: spec.instanceProfile is missing (v1alpha5 used the "
            "aws.defaultInstanceProfile setting); set spec.instanceProfile in the input and "
            "convert again"
        )
    spec: dict[str, Any] = {
        k: old[k] for k in _UNCHANGED_FIELDS if old.get(k) not in (None, [], {})
    }
    spec["subnetSelectorTerms"] = _selector_terms(
        doc, ctx, old.get("subnetSelector"), "subnetSelector", "subnetSelectorTerms"
    )
    spec["securityGroupSelectorTerms"] = _selector_terms(
        doc,
        ctx,
        old.get("securityGroupSelector"),
        "securityGroupSelector",
        "securityGroupSelectorTerms",
    )
    terms = _ami_selector_terms(doc, ctx, old.get("amiSelector"))
    family = old.get("amiFamily") or "AL2"
    if not old.get("amiFamily"):
        ctx.note(doc, "spec.amiFamily was unset (AL2 in v1alpha1); assumed AL2")
    _ami_terms(doc, ctx, family, terms, spec)
    _kubelet(doc, ctx, spec)
    ctx.note(doc, "kind AWSNodeTemplate (karpenter.k8s.aws/v1alpha1) is now EC2NodeClass")
    return _finish(doc, ctx, spec)


CONVERTERS: Final = (
    Converter(GROUP + "/v1beta1", "EC2NodeClass", _convert_ec2nodeclass_v1beta1, phase=1),
    Converter(
        GROUP + "/v1alpha1",
        "AWSNodeTemplate",
        _convert_awsnodetemplate_v1alpha1,
        phase=1,
        output_kind="EC2NodeClass",
    ),
)
