"""When karpy replaces an AKS node that has gone bad (the provider's repair policies)."""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from karpy.cloudprovider import RepairPolicy

__all__ = ["REPAIR_POLICIES"]

#: Replace a node whose Ready condition is False or Unknown for 10 minutes (online and
#: offline providers alike), and at once a Spot node whose eviction Azure announced: AKS's
#: node-problem-detector turns the VM's ``Preempt`` Scheduled Event (IMDS, at most 30 s
#: ahead) into the Node condition ``PreemptionScheduled=True`` (reason
#: ``SpotEvictionIncoming``); Karpenter-Azure registers that condition as a repair policy
#: too (its PR #1695), so the node is drained and replaced before it vanishes (one
#: second's toleration: the eviction is at most 30 s away, and karpy's conformance kit
#: wants every toleration positive).
REPAIR_POLICIES: Final = (
    RepairPolicy("Ready", "False", timedelta(minutes=10)),
    RepairPolicy("Ready", "Unknown", timedelta(minutes=10)),
    RepairPolicy("PreemptionScheduled", "True", timedelta(seconds=1)),
)
