"""Karpenter's NodePool hash (``karpenter.sh/nodepool-hash``, hash version ``v3``).

Karpenter computes ``hashstructure.Hash(nodePool.Spec.Template, FormatV2,
{SlicesAsSets, IgnoreZeroValue, ZeroNil})`` over its Go types. This module describes a
NodePool's template as exactly those Go values (:mod:`karpy.apis.hashstructure` walks
them), so karpy writes the same decimal string Karpenter writes for the same stored
NodePool: a cluster moving between the two sees no node drift from the hash.

The Go shape of ``NodeClaimTemplate`` (sigs.k8s.io/karpenter pkg/apis/v1), in
declaration order — field order matters to the hash::

    NodeClaimTemplate{ObjectMeta{Labels, Annotations},
                      Spec NodeClaimTemplateSpec{Taints, StartupTaints,
                          Requirements (hash:"ignore"), NodeClassRef *{Kind, Name, Group},
                          TerminationGracePeriod *metav1.Duration{Duration},
                          ExpireAfter NillableDuration{*time.Duration, Raw (ignored)}}}
    Taint{Key, Value, Effect, TimeAdded *metav1.Time{Time}}

Requirements are left out (requirement drift is judged separately), as are the NodePool's
resources and disruption budgets (outside the template). Go's JSON decoding makes an
*empty* map or list present in the object a non-nil value, which hashes differently
from an absent one; the parsed model remembers which fields its source carried
(pydantic's ``model_fields_set``), so the distinction survives. Defaults the API server
applies (``expireAfter: 720h``) are part of the model, as they are of the stored object.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Final

from karpy.apis.duration import go_duration_nanoseconds
from karpy.apis.hashstructure import (
    GoInt64,
    GoMap,
    GoPointer,
    GoSlice,
    GoString,
    GoStruct,
    GoTime,
    GoValue,
    StructField,
    hash_v2,
)

if TYPE_CHECKING:
    from karpy.apis.core import Taint
    from karpy.apis.v1.nodepool import NodeClaimTemplate

__all__ = [
    "HASH_VERSION",
    "go_metav1_duration",
    "go_nillable_duration",
    "nodeclaim_template_hash",
    "template_go_value",
]

HASH_VERSION: Final = "v3"
"""Karpenter's ``NodePoolHashVersion``: the algorithm and field set above."""

def _string_map(value: Mapping[str, str], present: bool) -> GoMap:
    # Absent (or empty and never written): nil. Present, even empty: a non-nil map.
    return GoMap(dict(value) if value or present else None)


def _time(value: datetime) -> GoStruct:
    # metav1.Time{Time time.Time}; decoding converts to time.Local (UTC in Karpenter's
    # container), which MarshalBinary writes with offset 0, not UTC's -1.
    return GoStruct("Time", (StructField("Time", GoTime(value, utc_location=False)),))


def _taint(taint: Taint) -> GoStruct:
    added = taint.time_added
    return GoStruct("Taint", (
        StructField("Key", GoString(taint.key)),
        StructField("Value", GoString(taint.value or "")),
        StructField("Effect", GoString(taint.effect)),
        StructField("TimeAdded", GoPointer(None if added is None else _time(added))),
    ))


def _taints(taints: list[Taint], present: bool) -> GoSlice:
    if not taints and not present:
        return GoSlice(None)
    return GoSlice([_taint(t) for t in taints])


def go_metav1_duration(text: str) -> GoStruct:
    """A ``metav1.Duration{Duration time.Duration}`` as hashed (also the providers')."""
    return GoStruct("Duration", (StructField("Duration", GoInt64(go_duration_nanoseconds(text))),))


def go_nillable_duration(text: str) -> GoStruct:
    """Karpenter's ``NillableDuration`` as hashed (also Karpenter Azure's LocalDNS)."""
    # NillableDuration{*time.Duration (embedded: field "Duration"), Raw []byte `hash:"ignore"`};
    # "Never" decodes to both nil, which makes the whole field a zero value.
    never = text == "Never"
    nanos: GoValue | None = None if never else GoInt64(go_duration_nanoseconds(text))
    return GoStruct("NillableDuration", (
        StructField("Duration", GoPointer(nanos)),
        StructField("Raw", GoSlice(None if never else []), ignored=True),
    ))


def template_go_value(template: NodeClaimTemplate) -> GoStruct:
    """The NodeClaimTemplate as the Go value Karpenter hashes (see the module docs)."""
    meta = template.metadata
    meta_set = meta.model_fields_set if "metadata" in template.model_fields_set else set()
    spec = template.spec
    spec_set = spec.model_fields_set
    ref = spec.node_class_ref
    tgp = spec.termination_grace_period
    object_meta = GoStruct("ObjectMeta", (
        StructField("Labels", _string_map(meta.labels, "labels" in meta_set)),
        StructField("Annotations", _string_map(meta.annotations, "annotations" in meta_set)),
    ))
    spec_value = GoStruct("NodeClaimTemplateSpec", (
        StructField("Taints", _taints(spec.taints, "taints" in spec_set)),
        StructField("StartupTaints", _taints(spec.startup_taints, "startup_taints" in spec_set)),
        StructField("Requirements", GoSlice([]), ignored=True),
        StructField("NodeClassRef", GoPointer(GoStruct("NodeClassReference", (
            StructField("Kind", GoString(ref.kind)),
            StructField("Name", GoString(ref.name)),
            StructField("Group", GoString(ref.group)),
        )))),
        StructField("TerminationGracePeriod",
                    GoPointer(None if tgp is None else go_metav1_duration(tgp))),
        StructField("ExpireAfter", go_nillable_duration(spec.expire_after)),
    ))
    return GoStruct("NodeClaimTemplate", (
        StructField("ObjectMeta", object_meta),
        StructField("Spec", spec_value),
    ))


def nodeclaim_template_hash(template: NodeClaimTemplate) -> str:
    """Karpenter's ``NodePool.Hash()`` of a NodePool with this template (decimal)."""
    return str(hash_v2(template_go_value(template)))
