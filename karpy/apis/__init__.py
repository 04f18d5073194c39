"""Pydantic models of Karpenter's v1 API (NodePool, NodeClaim) and the well-known labels,
annotations, taints and finalizer that karpy shares with Karpenter.

Modules, one idea each:

- ``labels``, ``annotations``, ``taints``: well-known keys and values (plain constants;
  ``taints.has_disrupted_taint`` tells whether a Node is being disrupted);
- ``pods``: where a pod is in its life and who owns it (Karpenter's pod utilities);
- ``duration``: Karpenter's duration strings ("720h", "Never");
- ``model``: the model base classes (camelCase aliases, omitempty output, CRD metadata);
- ``core``: shapes from Kubernetes' own APIs (ObjectMeta, Taint, Condition);
- ``conditions``: the status-condition helper (set, transition, Ready in step);
- ``v1``: NodePool and NodeClaim;
- ``v1alpha1``: NodeOverlay (feature gate NodeOverlay);
- ``extension``: what a provider contributes (its NodeClass kinds, labels, converters);
- ``crdgen``: the CRD generator behind ``karpy crds``; ``convert``: ``karpy convert``.
"""

from karpy.apis.conditions import Change, ConditionSet, Transition
from karpy.apis.core import Condition, ObjectMeta, Taint
from karpy.apis.v1 import NodeClaim, NodePool

__all__ = [
    "Change",
    "Condition",
    "ConditionSet",
    "NodeClaim",
    "NodePool",
    "ObjectMeta",
    "Taint",
    "Transition",
]
