"""KWOKNodeClass (karpenter.kwok.sh/v1alpha1), the NodeClass the kwok provider serves,
and the API extension that puts its CRD set in ``crds/kwok/`` through ``karpy crds``.

Same group, kind and fields as Karpenter's kwok provider, so NodePools written for it
work unchanged. A new object reads back with ``Ready=True`` (a schema default, as in
Karpenter), since there is nothing to resolve for a kwok node.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field, JsonValue

from karpy.apis.core import ConditionList, ObjectMeta
from karpy.apis.duration import DURATION_PATTERN
from karpy.apis.extension import APIExtension
from karpy.apis.labels import nodeclass_label_key
from karpy.apis.model import CRDInfo, KubeModel, PrinterColumn, Resource
from karpy.cloudprovider.kwok._wellknown import GROUP, KWOK_NODE_CLASS, WELL_KNOWN_LABELS

__all__ = ["API_EXTENSION", "KWOKNodeClass", "KWOKNodeClassSpec", "KWOKNodeClassStatus"]

_READY_BY_DEFAULT: Final[dict[str, JsonValue]] = {
    "conditions": [
        {
            "type": "Ready",
            "status": "True",
            "reason": "Ready",
            "message": "",
            "lastTransitionTime": "2024-01-01T01:01:01Z",
        }
    ]
}


class KWOKNodeClassSpec(KubeModel):
    """How kwok nodes are launched."""

    node_registration_delay: str | None = Field(
        None,
        pattern=DURATION_PATTERN,
        description=(
            "How long after launch the Node appears, to model the boot time of a real "
            "instance (e.g. 30s, 1m30s)."
        ),
    )


class KWOKNodeClassStatus(KubeModel):
    """The resolved state of a KWOKNodeClass."""

    conditions: ConditionList = Field(
        default_factory=list, description="Ready (True unless set otherwise)."
    )


class KWOKNodeClass(Resource):
    """The NodeClass of the kwok provider (karpenter.kwok.sh/v1alpha1)."""

    crd = CRDInfo(
        group=KWOK_NODE_CLASS.group,
        version=KWOK_NODE_CLASS.version,
        kind=KWOK_NODE_CLASS.kind,
        plural=KWOK_NODE_CLASS.plural,
        singular="kwoknodeclass",
        categories=("karpenter",),
        short_names=("kwoknc", "kwokncs"),
        printer_columns=(
            PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
        ),
    )

    api_version: Literal["karpenter.kwok.sh/v1alpha1"] = Field(
        "karpenter.kwok.sh/v1alpha1", alias="apiVersion"
    )
    kind: Literal["KWOKNodeClass"] = "KWOKNodeClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: KWOKNodeClassSpec = Field(
        default_factory=KWOKNodeClassSpec, description="How kwok nodes are launched."
    )
    status: KWOKNodeClassStatus = Field(
        default_factory=KWOKNodeClassStatus,
        description="The resolved state; Ready=True by default.",
        json_schema_extra={"default": _READY_BY_DEFAULT},
    )


#: What the kwok provider adds to karpy's API: the KWOKNodeClass CRD, and its instance
#: labels as well-known labels in a reserved domain (as Karpenter's kwok provider does).
API_EXTENSION: Final = APIExtension(
    name="kwok",
    resources=(KWOKNodeClass,),
    # The NodeClass label (karpenter.kwok.sh/kwoknodeclass) is written on every NodeClaim
    # the provisioner creates, so the restricted domain must still allow it.
    restricted_label_domains={
        GROUP: (
            nodeclass_label_key(GROUP, KWOK_NODE_CLASS.kind),
            *sorted(WELL_KNOWN_LABELS),
        )
    },
    well_known_labels=tuple(sorted(WELL_KNOWN_LABELS)),
)
