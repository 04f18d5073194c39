"""CustomResourceDefinitions from resource models, with the label rules of every extension."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from karpy.apis.core import Resource
from karpy.apis.crdgen.schema import resource_schema
from karpy.apis.extension import APIExtension

__all__ = ["LabelPolicy", "build_crd", "crd_filename"]


class LabelPolicy:
    """The label keys NodePools and NodeClaims may not use, gathered from all extensions.

    It turns the ``x-karpy-label-restrictions`` markers of the models into CEL rules:
    ``key`` marks one label key (a requirement's key), ``map`` a map of labels.
    """

    def __init__(self, extensions: Sequence[APIExtension], *, kind_restricted: Sequence[str] = ()):
        self.domains: list[tuple[str, tuple[str, ...]]] = []
        self.labels: list[str] = list(kind_restricted)
        self.exceptions: dict[str, tuple[str, ...]] = {}
        provider_labels: list[str] = []
        for index, ext in enumerate(extensions):
            for domain, allowed in ext.restricted_label_domains.items():
                self.domains.append((domain, tuple(allowed)))
            for domain, excepted in ext.label_domain_exceptions.items():
                self.exceptions[domain] = (*self.exceptions.get(domain, ()), *excepted)
            (self.labels if index == 0 else provider_labels).extend(ext.restricted_labels)
        # Karpenter's order: its own domain, its single labels, then the provider's.
        self._core_domains = self.domains[: len(extensions[0].restricted_label_domains)]
        self._provider_domains = self.domains[len(self._core_domains) :]
        self._provider_labels = provider_labels

    def rules(self, mode: str) -> list[dict[str, str]]:
        """CEL rules for a single key (``mode="key"``) or a map of labels (``"map"``)."""
        if mode not in ("key", "map"):
            raise ValueError(f"unknown label restriction mode {mode!r}")

        def wrap(expr: str) -> str:
            return f"self.all(x, {expr.replace('self', 'x')})" if mode == "map" else expr

        out: list[dict[str, str]] = []

        def domain_rule(domain: str, allowed: tuple[str, ...]) -> None:
            # Karpenter's shape: listed keys, or a sub-domain excepted, or not the domain.
            terms = []
            if allowed:
                terms.append(f"self in [{', '.join(json.dumps(k) for k in allowed)}]")
            terms += [
                f'self.find("^([^/]+)").endsWith({json.dumps(exception)})'
                for exception in self.exceptions.get(domain, ())
            ]
            terms.append(f'!self.find("^([^/]+)").endsWith({json.dumps(domain)})')
            expr = " || ".join(terms)
            out.append({"message": f'label domain "{domain}" is restricted', "rule": wrap(expr)})

        def label_rule(key: str) -> None:
            out.append(
                {
                    "message": f'label "{key}" is restricted',
                    "rule": wrap(f"self != {json.dumps(key)}"),
                }
            )

        for domain, allowed in self._core_domains:
            domain_rule(domain, allowed)
        for key in self.labels:
            label_rule(key)
        for domain, allowed in self._provider_domains:
            domain_rule(domain, allowed)
        for key in self._provider_labels:
            label_rule(key)
        return out


def crd_filename(cls: type[Resource]) -> str:
    """Where a kind's CRD is written: ``<group>_<plural>.yaml`` as in Karpenter's repos."""
    return f"{cls.crd.group}_{cls.crd.plural}.yaml"


def build_crd(cls: type[Resource], extensions: Sequence[APIExtension]) -> dict[str, Any]:
    """The CustomResourceDefinition object for one kind."""
    info = cls.crd
    policy = LabelPolicy(extensions, kind_restricted=info.restricted_labels)
    schema = resource_schema(cls, required=info.required, label_restrictions=policy.rules)
    names: dict[str, Any] = {}
    if info.categories:
        names["categories"] = list(info.categories)
    names["kind"] = info.kind
    names["listKind"] = f"{info.kind}List"
    names["plural"] = info.plural
    if info.short_names:
        names["shortNames"] = list(info.short_names)
    names["singular"] = info.singular
    version: dict[str, Any] = {}
    if info.printer_columns:
        version["additionalPrinterColumns"] = [c.as_dict() for c in info.printer_columns]
    version["name"] = info.version
    version["schema"] = {"openAPIV3Schema": schema}
    version["served"] = True
    version["storage"] = True
    subresources: dict[str, Any] = {}
    if info.scale is not None:
        subresources["scale"] = {
            "specReplicasPath": info.scale[0],
            "statusReplicasPath": info.scale[1],
        }
    if info.status_subresource:
        subresources["status"] = {}
    if subresources:
        version["subresources"] = subresources
    versions = [version]
    for served in info.served_versions:
        # same schema, served but not stored: no conversion webhook is needed
        versions.append({**copy.deepcopy(version), "name": served, "storage": False})
    metadata: dict[str, Any] = {"name": info.name}
    if info.annotations:
        metadata = {"annotations": dict(info.annotations), **metadata}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": {
            "group": info.group,
            "names": names,
            "scope": info.scope,
            "versions": versions,
        },
    }
