"""docs/api.md: the API reference, written from the same schemas as the CRDs so that it
lists every field with its type, default, validation and description."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from karpy.apis.crdgen.crd import build_crd
from karpy.apis.extension import CORE, APIExtension, load_extensions

__all__ = ["api_reference"]

_INTRO = """\
# API reference

karpy serves Karpenter's API: the same groups, kinds, fields, defaults and validation,
so manifests written for Karpenter apply unchanged. This page is generated from the
models in `karpy.apis` and the installed providers (`karpy crds --docs docs/api.md`);
the CRDs in `crds/` come from the same source.

CRDs are installed per provider (`crds/aws/`, `crds/azure/`, `crds/kwok/`, or
`karpy crds --provider NAME`), as Karpenter ships them: NodePool and NodeClaim carry
Karpenter's core label rules, listed below, plus the rules of that one provider, listed
under [Well-known labels](#well-known-labels); a label another provider reserves is free.

Field paths are dotted; `[]` is an item of a list and `{}` a value of a map. A field
marked *required* must be set when its parent is. Rules are the API server's CEL
validations; their message is what `kubectl apply` prints when one fails.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _type(node: dict[str, Any]) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "quantity (integer or string)"
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return "object (free-form)"
    kind = node.get("type", "")
    if kind == "array":
        return f"list of {_type(node['items'])}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"map of {_type(node['additionalProperties'])}"
    if node.get("format") == "date-time":
        return "timestamp"
    return str(kind)


def _constraints(node: dict[str, Any], required: bool) -> list[str]:
    out = []
    if required:
        out.append("*required*")
    if "enum" in node:
        out.append("one of " + ", ".join(f"`{v}`" for v in node["enum"]))
    for key, word in (
        ("minimum", ">="),
        ("maximum", "<="),
        ("minLength", "length >="),
        ("maxLength", "length <="),
        ("minItems", "items >="),
        ("maxItems", "items <="),
        ("maxProperties", "entries <="),
    ):
        if key in node:
            out.append(f"{word} {node[key]}")
    if "pattern" in node:
        out.append(f"matches `{node['pattern']}`")
    if node.get("x-kubernetes-list-type") in ("set", "map"):
        out.append(f"list type {node['x-kubernetes-list-type']}")
    for rule in node.get("x-kubernetes-validations", []):
        out.append(f"rule: {rule['message']}")
    return out


def _walk(
    node: dict[str, Any], path: str, required: bool
) -> Iterator[tuple[str, dict[str, Any], bool]]:
    yield path, node, required
    needed = set(node.get("required", []))
    for key, child in node.get("properties", {}).items():
        yield from _walk(child, f"{path}.{key}" if path else key, key in needed)
    for child, marker in ((node.get("items"), "[]"), (node.get("additionalProperties"), "{}")):
        if not isinstance(child, dict):
            continue
        if "properties" in child:
            needed_in_child = set(child.get("required", []))
            for key, grandchild in child["properties"].items():
                yield from _walk(grandchild, f"{path}{marker}.{key}", key in needed_in_child)
        elif _constraints(child, False):
            # A list item or map value with its own validation gets a row of its own.
            yield f"{path}{marker}", child, False


def _table(schema: dict[str, Any], top: str) -> list[str]:
    rows = [
        "| Field | Type | Default | Validation | Description |",
        "| --- | --- | --- | --- | --- |",
    ]
    root = schema["properties"].get(top)
    if root is None:
        return []
    for path, node, required in _walk(root, top, top in schema.get("required", [])):
        default = f"`{json.dumps(node['default'])}`" if "default" in node else ""
        rows.append(
            "| "
            + " | ".join(
                [
                    f"`{_cell(path)}`",
                    _cell(_type(node)),
                    _cell(default),
                    _cell("; ".join(_constraints(node, required))),
                    _cell(node.get("description", "")),
                ]
            )
            + " |"
        )
    return rows


def _section(crd: dict[str, Any]) -> list[str]:
    spec = crd["spec"]
    version = spec["versions"][0]
    schema = version["schema"]["openAPIV3Schema"]
    names = spec["names"]
    out = [
        f"## {names['kind']} ({spec['group']}/{version['name']})",
        "",
        schema.get("description", ""),
        "",
        f"Resource `{names['plural']}.{spec['group']}`, {spec['scope'].lower()}-scoped"
        + (f"; short names {', '.join(names['shortNames'])}" if names.get("shortNames") else "")
        + (f"; categories {', '.join(names['categories'])}" if names.get("categories") else "")
        + ".",
        "",
    ]
    columns = version.get("additionalPrinterColumns", [])
    if columns:
        normal = [c["name"].upper() for c in columns if not c.get("priority")]
        wide = [c["name"].upper() for c in columns if c.get("priority")]
        out.append(
            f"`kubectl get {names['plural']}` shows NAME {' '.join(normal)}"
            + (f"; `-o wide` adds {' '.join(wide)}" if wide else "")
            + "."
        )
        out.append("")
    for top, title in (("spec", "Spec"), ("status", "Status (written by karpy)")):
        table = _table(schema, top)
        if table:
            out += [f"### {title}", "", *table, ""]
    return out


_CONVERT = """\
## Converting older manifests: `karpy convert`

`karpy convert [FILE ...]` (or stdin) reads Karpenter v1beta1 NodePool, NodeClaim,
EC2NodeClass and AKSNodeClass manifests, and v1alpha5 Provisioner and v1alpha1
AWSNodeTemplate manifests, and writes v1 manifests to stdout. Every field it drops,
moves or changes is reported on stderr, for example:

- `spec.template.spec.kubelet` (v1beta1) and `spec.kubeletConfiguration` (v1alpha5) move
  to the referenced EC2NodeClass's `spec.kubelet` (for Azure: `maxPods` and the shared
  kubelet fields move to the AKSNodeClass);
- `consolidationPolicy: WhenUnderutilized` becomes `WhenEmptyOrUnderutilized` with
  `consolidateAfter: 0s`; `spec.disruption.expireAfter` moves to
  `spec.template.spec.expireAfter`;
- `nodeClassRef {apiVersion, kind, name}` becomes `{group, kind, name}`;
- an EC2NodeClass `amiFamily` without `amiSelectorTerms` becomes the alias term
  `family@latest`; Ubuntu (gone in v1) becomes AL2 with your selector terms;
- server-set metadata and status are dropped.

Input it cannot convert (an unknown kind, an inline v1alpha5 `provider`, Ubuntu without
AMI terms, ...) stops it with exit status 1 and a message naming the object, the field
and the fix. When an old reference names no NodeClass kind and several providers are
installed, pass `--default-nodeclass EC2NodeClass.karpenter.k8s.aws`.
"""


def _well_known(exts: Sequence[APIExtension]) -> list[str]:
    out = [
        "## Well-known labels",
        "",
        "Labels karpy sets on nodes and that NodePool requirements and pod scheduling "
        "constraints may use, by the package that defines them. Other keys in a reserved "
        "domain, and the restricted labels, are rejected in NodePool requirements and "
        "template labels when that package's CRD set is installed (karpenter's always).",
        "",
        "| Package | Reserved domains | Restricted labels | Labels |",
        "| --- | --- | --- | --- |",
    ]
    for ext in exts:
        domains = ", ".join(f"`{d}`" for d in ext.restricted_label_domains)
        restricted = ", ".join(f"`{k}`" for k in ext.restricted_labels)
        keys = ", ".join(f"`{k}`" for k in ext.well_known_labels)
        out.append(f"| {ext.name} | {domains} | {restricted} | {keys} |")
    return [*out, ""]


def api_reference(extensions: Sequence[APIExtension] | None = None) -> str:
    """The markdown of docs/api.md."""
    exts = list(extensions) if extensions is not None else load_extensions()
    lines = [_INTRO]
    kinds = [cls for ext in exts for cls in ext.resources]
    lines.append(
        "Kinds: "
        + ", ".join(
            f"[{c.crd.kind}](#{c.crd.kind.lower()}-{c.crd.group.replace('.', '')}{c.crd.version})"
            for c in kinds
        )
        + "."
    )
    lines.append("")
    for ext in exts:
        # The core kinds with the core rules only; a provider's kinds with its set's.
        scope = [CORE] if ext is CORE else [CORE, ext]
        for cls in ext.resources:
            lines += _section(build_crd(cls, scope))
    lines += _well_known(exts)
    lines.append(_CONVERT)
    return "\n".join(lines).rstrip() + "\n"
