"""The NodeClaim the provisioner creates for a planned node.

It follows Karpenter's NodeClaimTemplate.ToNodeClaim: named ``<nodepool>-<5 random>``
(``generateName``), owned by the NodePool, labelled with the template's labels, the
NodePool and NodeClass labels and any custom label the requirements pin to one value,
annotated with the template's annotations, the NodePool hash and whether minValues was
relaxed (``karpenter.sh/nodeclaim-min-values-relaxed``) and whether a NodeOverlay priced
or added capacity to one of its instance types (``karpenter.sh/price-overlay-applied``,
``karpenter.sh/capacity-overlay-applied``), and with the template's
spec whose requirements are narrowed to the planned instance types (cheapest first, at
most 600, keeping minValues), capacity types and zones, and whose resource requests are
the pods' plus DaemonSet overhead.

Unlike Karpenter, the NodeClaim is created with the termination finalizer already on it.
The lifecycle and termination controllers would each add it with their own
optimistically locked patch right after the create (Karpenter does that, and keeps
doing it for NodeClaims created by others); at a thousand new NodeClaims that was two
requests and a conflict per NodeClaim on an API server that was the bottleneck.
"""

from __future__ import annotations

from typing import Any

from karpy.apis import NodePool
from karpy.apis.annotations import (
    ANNOTATION_CAPACITY_OVERLAY_APPLIED,
    ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED,
    ANNOTATION_NODEPOOL_HASH,
    ANNOTATION_NODEPOOL_HASH_VERSION,
    ANNOTATION_PRICE_OVERLAY_APPLIED,
    ANNOTATION_REQUESTED_DRA_DRIVERS,
    FINALIZER_TERMINATION,
    NODEPOOL_HASH_VERSION,
)
from karpy.apis.labels import LABEL_INITIALIZED, LABEL_INSTANCE_TYPE, LABEL_REGISTERED
from karpy.scheduling import NodeClaimPlan

__all__ = ["instance_type_names", "nodeclaim_manifest"]

# Requirements the simulator adds so DaemonSets selecting on them are counted; a
# NodeClaim must not carry them (they would stop it from ever registering).
_SIMULATION_ONLY = frozenset({LABEL_REGISTERED, LABEL_INITIALIZED})


def nodeclaim_manifest(
    plan: NodeClaimPlan, nodepool: NodePool, *, uid: str, nodepool_hash: str | None = None
) -> dict[str, Any]:
    """The NodeClaim to create for ``plan`` from ``nodepool`` (whose uid is ``uid``);
    ``nodepool_hash`` is ``nodepool.hash()`` when the caller has it already."""
    name = nodepool.metadata.name or plan.nodepool
    template = nodepool.spec.template
    requests: dict[str, int | str] = dict(plan.resource_requests())
    spec = template.to_nodeclaim_spec(requests=requests).to_dict()
    spec["requirements"] = [
        r for r in plan.node_selector_requirements() if r["key"] not in _SIMULATION_ONLY
    ]
    labels = {**template.metadata.labels, **plan.labels}
    annotations = {
        **template.metadata.annotations,
        ANNOTATION_NODEPOOL_HASH: nodepool_hash or nodepool.hash(),
        ANNOTATION_NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION,
        # Karpenter writes it on every NodeClaim its scheduler makes, true or false.
        ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED: str(plan.min_values_relaxed).lower(),
    }
    if plan.dra_drivers:
        annotations[ANNOTATION_REQUESTED_DRA_DRIVERS] = ",".join(plan.dra_drivers)
    # As Karpenter: set (to "true") only when an overlay touched one of the types.
    if any(o.overlay for it in plan.instance_types for o in it.offerings):
        annotations[ANNOTATION_PRICE_OVERLAY_APPLIED] = "true"
    if any(it.capacity_overlays for it in plan.instance_types):
        annotations[ANNOTATION_CAPACITY_OVERLAY_APPLIED] = "true"
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "generateName": f"{name}-",
            "labels": labels,
            "annotations": annotations,
            "finalizers": [FINALIZER_TERMINATION],
            "ownerReferences": [
                {
                    "apiVersion": "karpenter.sh/v1",
                    "kind": "NodePool",
                    "name": name,
                    "uid": uid,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


def instance_type_names(nodeclaim: dict[str, Any]) -> list[str]:
    """The instance types a NodeClaim allows, in the order it lists them."""
    for requirement in (nodeclaim.get("spec") or {}).get("requirements") or ():
        if requirement.get("key") == LABEL_INSTANCE_TYPE and requirement.get("operator") == "In":
            return [str(v) for v in requirement.get("values") or ()]
    return []
