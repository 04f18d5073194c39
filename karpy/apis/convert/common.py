"""Pieces every converter needs: clean metadata, nodeClassRef from an old reference,
and durations from seconds."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from karpy.apis.convert.fieldpath import copy_of
from karpy.apis.convert.types import ConversionContext, ConversionError, Document, describe
from karpy.apis.duration import format_duration

__all__ = ["SERVER_SET_METADATA", "carry_metadata", "node_class_ref", "seconds_to_duration"]

#: Metadata the API server sets; an object read with `kubectl get -o yaml` carries it.
SERVER_SET_METADATA = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
)
_DROPPED_ANNOTATIONS = (
    "kubectl.kubernetes.io/last-applied-configuration",
    "compatibility.karpenter.sh/v1beta1-kubelet-conversion",
    "compatibility.karpenter.sh/v1beta1-nodeclass-reference",
    "compatibility.karpenter.k8s.aws/v1beta1-ubuntu",
)


def carry_metadata(doc: Document, ctx: ConversionContext) -> dict[str, Any]:
    """The metadata to write: the user's, without what the server or old versions set."""
    metadata = copy_of(doc.get("metadata") or {})
    if not metadata.get("name"):
        raise ConversionError(f"{describe(doc)}: metadata.name is missing; every object needs one")
    dropped = [key for key in SERVER_SET_METADATA if key in metadata]
    for key in dropped:
        del metadata[key]
    if dropped:
        ctx.note(doc, f"dropped server-set metadata ({', '.join(dropped)})")
    annotations = copy_of(metadata.get("annotations") or {})
    for key in _DROPPED_ANNOTATIONS:
        if key in annotations:
            del annotations[key]
            ctx.note(doc, f"dropped annotation {key} (it describes the old version)")
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    return metadata


def node_class_ref(
    doc: Document, ref: dict[str, Any] | None, ctx: ConversionContext, *, field: str
) -> dict[str, str]:
    """A v1 nodeClassRef {group, kind, name} from a v1beta1 nodeClassRef or v1alpha5
    providerRef {apiVersion, kind, name}."""
    if not ref or not ref.get("name"):
        raise ConversionError(
            f"{describe(doc)}: {field}.name is missing; v1 needs a NodeClass reference"
        )
    api_version = ref.get("apiVersion") or ""
    group = api_version.split("/")[0] if api_version else ""
    kind = ref.get("kind") or ""
    if not group or not kind:
        if ctx.default_nodeclass is None:
            raise ConversionError(
                f"{describe(doc)}: {field} has no apiVersion/kind and the default NodeClass "
                "is ambiguous; set them in the input or pass --default-nodeclass "
                "(e.g. EC2NodeClass.karpenter.k8s.aws)"
            )
        default_group, default_kind = ctx.default_nodeclass
        group, kind = group or default_group, kind or default_kind
        ctx.note(doc, f"{field} names no apiVersion/kind; assumed {kind}.{group}")
    new_kind = ctx.renamed_kinds.get((group, kind))
    if new_kind is not None:
        ctx.note(doc, f"{field}.kind {kind} is now {new_kind}")
        kind = new_kind
    return {"group": group, "kind": kind, "name": str(ref["name"])}


#: The most whole seconds a Go time.Duration holds (v1's expireAfter and consolidateAfter
#: are Go durations; 2562047h47m16s).
MAX_DURATION_SECONDS = (2**63 - 1) // 10**9


def seconds_to_duration(seconds: Any) -> str:
    """A duration string from a number of seconds (the v1alpha5 TTL fields, Go int64s).

    Raises ValueError for a value that is not a whole number of seconds from 0 to
    Go's duration limit (``1e999``, ``.inf``, ``true``, ``"30"``, ``-1``, 10**20).
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise ValueError(f"{seconds!r} is not a whole number of seconds")
    if not 0 <= seconds <= MAX_DURATION_SECONDS:
        raise ValueError(
            f"{seconds} is out of range: from 0 to {MAX_DURATION_SECONDS} seconds (Go's "
            "duration limit, about 292 years)"
        )
    return format_duration(timedelta(seconds=seconds))
